//! One pod's placement (kube's `schedulePod`): filter the nodes (the
//! nominated node first, then from a rotating start until enough feasible
//! nodes are found), score the feasible ones, and pick the best, ties at
//! random. No I/O.

use std::sync::Arc;

use rand::Rng;

use crate::framework::num_nodes::num_feasible_nodes_to_find;
use crate::framework::{
    CycleState, Diagnosis, FitError, Framework, NominatedPods, Snapshot, Status,
};
use crate::model::{NodeInfo, PodInfo};

pub const NO_NODES: &str = "no nodes available to schedule pods";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub evaluated: usize,
    pub feasible: usize,
}

#[derive(Debug, Clone)]
pub enum ScheduleError {
    /// The pod fits no node (preemption may help).
    Fit(Box<FitError>),
    /// A plugin failed, or there are no nodes at all.
    Error(Status),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::Fit(fit) => write!(f, "{fit}"),
            ScheduleError::Error(status) => write!(f, "{}", status.message()),
        }
    }
}

/// The placement state that outlives one cycle: where the next search starts.
#[derive(Debug, Default)]
pub struct Algorithm {
    next_start: usize,
}

impl Algorithm {
    pub fn schedule(
        &mut self,
        framework: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &dyn NominatedPods,
        percentage: i32,
    ) -> Result<Placement, ScheduleError> {
        if snapshot.is_empty() {
            return Err(ScheduleError::Error(Status::error(NO_NODES)));
        }
        let (feasible, diagnosis) = self
            .find_feasible(framework, state, pod, snapshot, nominated, percentage)
            .map_err(|e| *e)?;
        let evaluated = feasible.len() + diagnosis.node_statuses.len();
        if feasible.is_empty() {
            return Err(ScheduleError::Fit(Box::new(FitError {
                num_all_nodes: snapshot.len(),
                diagnosis,
            })));
        }
        if feasible.len() == 1 {
            return Ok(Placement {
                node: feasible[0].name.clone(),
                evaluated,
                feasible: 1,
            });
        }
        let status = framework.run_pre_score(state, pod, &feasible, snapshot);
        if !status.is_success() {
            return Err(ScheduleError::Error(status));
        }
        let scores = framework
            .run_score(state, pod, &feasible)
            .map_err(ScheduleError::Error)?;
        let node = select_host(&feasible, &scores);
        Ok(Placement {
            node,
            evaluated,
            feasible: feasible.len(),
        })
    }

    fn find_feasible(
        &mut self,
        framework: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &dyn NominatedPods,
        percentage: i32,
    ) -> Result<(Vec<Arc<NodeInfo>>, Diagnosis), Box<ScheduleError>> {
        let mut diagnosis = Diagnosis::default();
        let status = framework.run_pre_filter(state, pod, snapshot);
        if !status.is_success() {
            if !status.is_rejected() {
                return Err(Box::new(ScheduleError::Error(status)));
            }
            for node in snapshot.nodes() {
                diagnosis
                    .node_statuses
                    .set(node.name.clone(), status.clone());
            }
            diagnosis.pre_filter_message = Some(status.message());
            diagnosis.record(&status);
            return Ok((Vec::new(), diagnosis));
        }
        if let Some(node) = nominated_node(pod).and_then(|name| snapshot.get(name)) {
            if framework
                .run_filter_with_nominated(state, pod, node, nominated)
                .is_success()
            {
                return Ok((vec![node.clone()], diagnosis));
            }
        }
        let nodes = snapshot.nodes();
        let wanted = num_feasible_nodes_to_find(percentage, nodes.len());
        let start = self.next_start % nodes.len();
        let mut feasible = Vec::with_capacity(wanted.min(nodes.len()));
        let mut processed = 0;
        for i in 0..nodes.len() {
            let node = &nodes[(start + i) % nodes.len()];
            processed += 1;
            let status = framework.run_filter_with_nominated(state, pod, node, nominated);
            match status.code {
                crate::framework::Code::Success => {
                    feasible.push(node.clone());
                    if feasible.len() >= wanted {
                        break;
                    }
                }
                crate::framework::Code::Error => {
                    return Err(Box::new(ScheduleError::Error(status)))
                }
                _ => {
                    diagnosis.record(&status);
                    diagnosis.node_statuses.set(node.name.clone(), status);
                }
            }
        }
        self.next_start = (start + processed) % nodes.len();
        Ok((feasible, diagnosis))
    }
}

fn nominated_node(pod: &PodInfo) -> Option<&str> {
    pod.pod
        .status
        .as_ref()?
        .nominated_node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// The highest-scoring node; among equals, one at random (reservoir sampling).
pub fn select_host(nodes: &[Arc<NodeInfo>], scores: &[i64]) -> String {
    let mut rng = rand::rng();
    let mut best = 0;
    let mut ties = 1;
    for i in 1..nodes.len() {
        if scores[i] > scores[best] {
            best = i;
            ties = 1;
        } else if scores[i] == scores[best] {
            ties += 1;
            if rng.random_range(0..ties) == 0 {
                best = i;
            }
        }
    }
    nodes[best].name.clone()
}
