//! DefaultPreemption, the PostFilter plugin: when a pod fits nowhere, find a
//! node where evicting lower-priority pods makes room, choose it as kube
//! does, and nominate it. The evictions themselves are the core's to make
//! (graceful deletions through the API).

pub mod choice;
pub mod victims;

use std::sync::Arc;

use rand::Rng;
use serde::Deserialize;

use self::choice::{pick, Candidate};
use self::victims::select_victims;
use crate::framework::{
    ArgsError, ClusterLister, Code, CycleState, Diagnosis, FitError, NodeStatuses, Plugin,
    PluginContext, PostFilterContext, PostFilterPlugin, PostFilterResult, Status,
};
use crate::model::PodInfo;

pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PreemptionArgs {
    min_candidate_nodes_percentage: Option<i64>,
    min_candidate_nodes_absolute: Option<i64>,
}

pub struct DefaultPreemption {
    min_candidate_percentage: usize,
    min_candidate_absolute: usize,
    lister: Arc<dyn ClusterLister>,
}

impl DefaultPreemption {
    pub const NAME: &'static str = "DefaultPreemption";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: PreemptionArgs = ArgsError::decode(context.args)?;
        let percentage = args.min_candidate_nodes_percentage.unwrap_or(10);
        let absolute = args.min_candidate_nodes_absolute.unwrap_or(100);
        if !(0..=100).contains(&percentage) {
            return Err(ArgsError::new(
                "minCandidateNodesPercentage",
                format!("Invalid value: {percentage}: not in valid range [0, 100]"),
            ));
        }
        if absolute < 0 {
            return Err(ArgsError::new(
                "minCandidateNodesAbsolute",
                format!("Invalid value: {absolute}: not in valid range [0, inf)"),
            ));
        }
        if percentage == 0 && absolute == 0 {
            return Err(ArgsError::new(
                "minCandidateNodesAbsolute",
                "Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage",
            ));
        }
        Ok(Arc::new(DefaultPreemption {
            min_candidate_percentage: percentage as usize,
            min_candidate_absolute: absolute as usize,
            lister: context.lister.clone(),
        }))
    }

    pub fn with_lister(lister: Arc<dyn ClusterLister>) -> DefaultPreemption {
        DefaultPreemption {
            min_candidate_percentage: 10,
            min_candidate_absolute: 100,
            lister,
        }
    }

    fn candidates_wanted(&self, nodes: usize) -> usize {
        (nodes * self.min_candidate_percentage / 100)
            .max(self.min_candidate_absolute)
            .min(nodes)
    }

    /// Why `pod` may not preempt, if it may not.
    fn ineligible(
        &self,
        pod: &PodInfo,
        statuses: &NodeStatuses,
        context: &PostFilterContext,
    ) -> Option<&'static str> {
        if pod.spec().preemption_policy.as_deref() == Some("Never") {
            return Some("not eligible due to preemptionPolicy=Never.");
        }
        let nominated = pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())?;
        if statuses
            .get(nominated)
            .is_some_and(|s| s.code == Code::UnschedulableAndUnresolvable)
        {
            return None;
        }
        let node = context.snapshot.get(nominated)?;
        let terminating = node
            .pods
            .iter()
            .any(|p| p.priority < pod.priority && terminating_by_preemption(p));
        terminating.then_some("not eligible due to a terminating pod on the nominated node.")
    }

    fn find_candidates(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeStatuses,
        context: &PostFilterContext,
    ) -> (Vec<Candidate>, NodeStatuses) {
        let snapshot = context.snapshot;
        let potential: Vec<_> = snapshot
            .nodes()
            .iter()
            .filter(|n| statuses.get(&n.name).map(|s| s.code) == Some(Code::Unschedulable))
            .collect();
        let mut dry_run = NodeStatuses::default();
        if potential.is_empty() {
            return (Vec::new(), dry_run);
        }
        let budgets = self.lister.disruption_budgets();
        let wanted = self.candidates_wanted(potential.len());
        let offset = rand::rng().random_range(0..potential.len());
        let (mut clean, mut violating) = (Vec::new(), Vec::new());
        for i in 0..potential.len() {
            let node = potential[(offset + i) % potential.len()];
            match select_victims(
                context.framework,
                state,
                pod,
                node,
                &budgets,
                context.nominated,
            ) {
                Ok(victims) if victims.pods.is_empty() => {
                    dry_run.set(
                        node.name.clone(),
                        Status::error(format!(
                            "expected at least one victim pod on node {:?}",
                            node.name
                        )),
                    );
                }
                Ok(victims) => {
                    let candidate = Candidate {
                        node: node.name.clone(),
                        victims,
                    };
                    if candidate.victims.pdb_violations == 0 {
                        clean.push(candidate);
                    } else {
                        violating.push(candidate);
                    }
                    if !clean.is_empty() && clean.len() + violating.len() >= wanted {
                        break;
                    }
                }
                Err(status) => dry_run.set(node.name.clone(), status),
            }
        }
        clean.extend(violating);
        (clean, dry_run)
    }
}

/// Being deleted after a preemption (kube's DisruptionTarget condition).
fn terminating_by_preemption(pod: &PodInfo) -> bool {
    pod.is_terminating()
        && pod
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.type_ == "DisruptionTarget"
                        && c.status == "True"
                        && c.reason.as_deref() == Some("PreemptionByScheduler")
                })
            })
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    crate::serves!(post_filter);
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeStatuses,
        context: &PostFilterContext,
    ) -> (Option<PostFilterResult>, Status) {
        if let Some(reason) = self.ineligible(pod, statuses, context) {
            return (None, Status::unschedulable(format!("preemption: {reason}")));
        }
        let (candidates, dry_run) = self.find_candidates(state, pod, statuses, context);
        let Some(best) = pick(&candidates) else {
            let mut diagnosis = Diagnosis {
                node_statuses: dry_run,
                ..Default::default()
            };
            diagnosis
                .node_statuses
                .set_absent(Status::unresolvable(NOT_HELPFUL));
            let fit = FitError {
                num_all_nodes: context.snapshot.len(),
                diagnosis,
            };
            let result = PostFilterResult {
                clear_nomination: true,
                ..Default::default()
            };
            return (
                Some(result),
                Status::unschedulable(format!("preemption: {fit}")),
            );
        };
        let displaced = context
            .nominated
            .nominated_for(&best.node)
            .into_iter()
            .filter(|p| p.priority < pod.priority && p.key != pod.key)
            .collect();
        let result = PostFilterResult {
            nominated_node: Some(best.node.clone()),
            victims: best.victims.pods.clone(),
            clear_nomination: false,
            displaced_nominations: displaced,
        };
        (Some(result), Status::success())
    }
}

#[cfg(test)]
mod tests;
