//! PodTopologySpread's Score: nodes in domains with fewer matching pods score
//! higher, each constraint weighted by log(number of domains + 2).

use std::collections::HashSet;
use std::sync::Arc;

use super::constraints::{has_all_keys, visit_counts, Constraint, HOSTNAME_KEY};
use crate::framework::MAX_NODE_SCORE;
use crate::model::{NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;
use crate::plugins::node_affinity::RequiredNodeAffinity;

#[derive(Clone)]
pub struct ScoreState {
    pub constraints: Vec<Constraint>,
    /// Feasible nodes without every topology key: they score 0.
    pub ignored: HashSet<String>,
    /// Per constraint: value -> matching pods; for a hostname constraint,
    /// node name -> the node's own matching pods (as kube counts them at
    /// Score, but from the memo, so a node's pods are not matched again on
    /// every cycle while it is unchanged).
    pub counts: Vec<foldhash::HashMap<String, i64>>,
    pub weights: Vec<f64>,
}

impl ScoreState {
    /// `require_all_keys` is false only for the system defaults, so that
    /// nodes without a zone label are still spread by hostname.
    pub fn compute(
        pod: &PodInfo,
        constraints: Vec<Constraint>,
        feasible: &[Arc<NodeInfo>],
        all: &[Arc<NodeInfo>],
        require_all_keys: bool,
        memo: &NodeMemo<u32>,
    ) -> ScoreState {
        let mut ignored = HashSet::new();
        let mut counts: Vec<foldhash::HashMap<String, i64>> =
            vec![Default::default(); constraints.len()];
        for node in feasible {
            if require_all_keys && !has_all_keys(node.labels(), &constraints) {
                ignored.insert(node.name.clone());
                continue;
            }
            for (i, constraint) in constraints.iter().enumerate() {
                if constraint.topology_key == HOSTNAME_KEY {
                    counts[i].insert(node.name.clone(), 0);
                } else if let Some(value) = node.labels().get(&constraint.topology_key) {
                    counts[i].entry(value.clone()).or_insert(0);
                }
            }
        }
        let weights = constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size = if c.topology_key == HOSTNAME_KEY {
                    feasible.len() - ignored.len()
                } else {
                    counts[i].len()
                };
                ((size + 2) as f64).ln()
            })
            .collect();
        count_pods(pod, &constraints, all, require_all_keys, memo, &mut counts);
        ScoreState {
            constraints,
            ignored,
            counts,
            weights,
        }
    }

    pub fn score(&self, node: &NodeInfo) -> i64 {
        if self.ignored.contains(&node.name) {
            return 0;
        }
        let mut score = 0.0;
        for (i, constraint) in self.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&constraint.topology_key) else {
                continue;
            };
            let domain = match constraint.topology_key == HOSTNAME_KEY {
                true => &node.name,
                false => value,
            };
            let count = self.counts[i].get(domain).copied().unwrap_or(0);
            score += count as f64 * self.weights[i] + (constraint.max_skew - 1) as f64;
        }
        score.round() as i64
    }

    /// Fewer matching pods is better: `100 * (max + min - score) / max`.
    pub fn normalize(&self, nodes: &[Arc<NodeInfo>], scores: &mut [i64]) {
        let considered = || {
            nodes
                .iter()
                .zip(scores.iter())
                .filter(|(n, _)| !self.ignored.contains(&n.name))
                .map(|(_, s)| *s)
        };
        let min = considered().min().unwrap_or(0);
        let max = considered().max().unwrap_or(0);
        for (node, score) in nodes.iter().zip(scores.iter_mut()) {
            *score = if self.ignored.contains(&node.name) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *score) / max
            };
        }
    }
}

/// Adds each node's matching pods to its domain's count, for the domains
/// the feasible nodes are in (`counts` holds those, at zero).
fn count_pods(
    pod: &PodInfo,
    constraints: &[Constraint],
    all: &[Arc<NodeInfo>],
    require_all_keys: bool,
    memo: &NodeMemo<u32>,
    counts: &mut [foldhash::HashMap<String, i64>],
) {
    let affinity = RequiredNodeAffinity::of(pod);
    visit_counts(pod, constraints, all, memo, |node, i, count| {
        if require_all_keys && !has_all_keys(node.labels(), constraints) {
            return;
        }
        let constraint = &constraints[i];
        // A node's own pods, whatever the node inclusion policies.
        if constraint.topology_key == HOSTNAME_KEY {
            if let Some(own) = counts[i].get_mut(&node.name) {
                *own = count;
            }
            return;
        }
        if !constraint.includes(pod, node, &affinity) {
            return;
        }
        let Some(value) = node.labels().get(&constraint.topology_key) else {
            return;
        };
        if let Some(total) = counts[i].get_mut(value) {
            *total += count;
        }
    });
}
