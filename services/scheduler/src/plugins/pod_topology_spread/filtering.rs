//! PodTopologySpread's Filter: placing the pod must not make any
//! DoNotSchedule constraint's skew (its domain's matching pods minus the
//! emptiest domain's) exceed maxSkew.

use super::constraints::{add_to_domain, has_all_keys, visit_counts, Constraint};
use crate::framework::Status;
use crate::model::{NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;
use crate::plugins::node_affinity::RequiredNodeAffinity;

pub const REASON_CONSTRAINTS: &str = "node(s) didn't match pod topology spread constraints";
pub const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Matching pods per domain for each constraint, as PreFilter counted them.
#[derive(Clone)]
pub struct FilterState {
    pub constraints: Vec<Constraint>,
    /// Per constraint: topology value -> matching pods.
    pub counts: Vec<foldhash::HashMap<String, i64>>,
    pub affinity: RequiredNodeAffinity,
}

impl FilterState {
    pub fn compute(
        pod: &PodInfo,
        constraints: Vec<Constraint>,
        nodes: &[std::sync::Arc<NodeInfo>],
        memo: &NodeMemo<u32>,
    ) -> FilterState {
        let affinity = RequiredNodeAffinity::of(pod);
        let mut counts: Vec<foldhash::HashMap<String, i64>> =
            vec![Default::default(); constraints.len()];
        visit_counts(pod, &constraints, nodes, memo, |node, i, count| {
            let constraint = &constraints[i];
            if has_all_keys(node.labels(), &constraints)
                && constraint.includes(pod, node, &affinity)
            {
                let value = &node.labels()[&constraint.topology_key];
                add_to_domain(&mut counts[i], value, count);
            }
        });
        FilterState {
            constraints,
            counts,
            affinity,
        }
    }

    /// Preemption's dry run added (`delta` 1) or removed (-1) `other` on `node`.
    pub fn update(&mut self, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64) {
        if other.namespace() != pod.namespace() || !has_all_keys(node.labels(), &self.constraints) {
            return;
        }
        for (i, constraint) in self.constraints.iter().enumerate() {
            if !constraint.includes(pod, node, &self.affinity)
                || !constraint.selector.matches(other.labels())
            {
                continue;
            }
            let value = &node.labels()[&constraint.topology_key];
            *self.counts[i].entry(value.clone()).or_insert(0) += delta;
        }
    }

    /// The emptiest domain's count; 0 while there are fewer domains than minDomains.
    fn min_count(&self, i: usize) -> i64 {
        let counts = &self.counts[i];
        if counts.len() < self.constraints[i].min_domains {
            return 0;
        }
        counts.values().copied().min().unwrap_or(0)
    }

    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Status {
        for (i, constraint) in self.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&constraint.topology_key) else {
                return Status::unresolvable(REASON_MISSING_LABEL);
            };
            let self_match = i64::from(constraint.selector.matches(pod.labels()));
            let count = self.counts[i].get(value).copied().unwrap_or(0);
            let skew = count + self_match - self.min_count(i);
            if skew > constraint.max_skew {
                return Status::unschedulable(REASON_CONSTRAINTS);
            }
        }
        Status::success()
    }
}
