//! A pod's spread constraints, compiled: its own (`topologySpreadConstraints`)
//! or, when it has none, the profile's defaults with a selector built from
//! the workloads that select it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use crate::framework::ClusterLister;
use crate::model::label_digest;
use crate::model::taint::{first_untolerated, NO_EXECUTE, NO_SCHEDULE};
use crate::model::{LabelMatcher, Labels, NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;
use crate::plugins::node_affinity::RequiredNodeAffinity;

pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";
pub const DO_NOT_SCHEDULE: &str = "DoNotSchedule";
pub const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

#[derive(Debug, Clone)]
pub struct Constraint {
    pub max_skew: i64,
    pub topology_key: String,
    pub selector: LabelMatcher,
    pub min_domains: usize,
    /// Count only nodes matching the pod's nodeSelector / required affinity (default).
    pub honor_node_affinity: bool,
    /// Count only nodes whose taints the pod tolerates (default: no).
    pub honor_node_taints: bool,
}

impl Constraint {
    fn compile(pod: &PodInfo, c: &TopologySpreadConstraint) -> Constraint {
        let mut selector = c.label_selector.clone();
        if let Some(selector) = selector.as_mut() {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = pod.labels().get(key) {
                    selector
                        .match_expressions
                        .get_or_insert_with(Vec::new)
                        .push(LabelSelectorRequirement {
                            key: key.clone(),
                            operator: "In".into(),
                            values: Some(vec![value.clone()]),
                        });
                }
            }
        }
        Constraint {
            max_skew: i64::from(c.max_skew),
            topology_key: c.topology_key.clone(),
            selector: LabelMatcher::new(selector.as_ref()),
            min_domains: c.min_domains.unwrap_or(1).max(1) as usize,
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    /// Whether `node` takes part in this constraint's counting for `pod`.
    pub fn includes(
        &self,
        pod: &PodInfo,
        node: &NodeInfo,
        affinity: &RequiredNodeAffinity,
    ) -> bool {
        if self.honor_node_affinity && !affinity.matches(node) {
            return false;
        }
        if self.honor_node_taints
            && first_untolerated(node.taints(), pod.tolerations(), &[NO_SCHEDULE, NO_EXECUTE])
                .is_some()
        {
            return false;
        }
        true
    }
}

/// The system defaults (kube's): spread by host (max skew 3) and by zone (5).
pub fn system_defaults() -> Vec<TopologySpreadConstraint> {
    let constraint = |key: &str, skew: i32| TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: SCHEDULE_ANYWAY.into(),
        ..Default::default()
    };
    vec![constraint(HOSTNAME_KEY, 3), constraint(ZONE_KEY, 5)]
}

/// The constraints of `pod` with `when_unsatisfiable`.
pub fn constraints_for(
    pod: &PodInfo,
    when_unsatisfiable: &str,
    defaults: &[TopologySpreadConstraint],
    lister: &dyn ClusterLister,
) -> Vec<Constraint> {
    let own = pod
        .spec()
        .topology_spread_constraints
        .as_deref()
        .unwrap_or_default();
    if !own.is_empty() {
        return own
            .iter()
            .filter(|c| c.when_unsatisfiable == when_unsatisfiable)
            .map(|c| Constraint::compile(pod, c))
            .collect();
    }
    let wanted: Vec<&TopologySpreadConstraint> = defaults
        .iter()
        .filter(|c| c.when_unsatisfiable == when_unsatisfiable)
        .collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let selectors = lister.workload_selectors(&pod.pod);
    if selectors.is_empty() {
        return Vec::new();
    }
    let selector = LabelMatcher::AllOf(selectors);
    wanted
        .into_iter()
        .map(|c| Constraint {
            selector: selector.clone(),
            ..Constraint::compile(pod, c)
        })
        .collect()
}

/// Whether `labels` carry every constraint's topology key.
pub fn has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// Hands `visit` each of `nodes` with, for each constraint (by index), the
/// node's pods that its selector matches. Constraints sharing a selector
/// (the defaults always do) are counted once, and counts are remembered in
/// `memo` per namespace and selector, so Filter and Score share them.
pub fn visit_counts(
    pod: &PodInfo,
    constraints: &[Constraint],
    nodes: &[Arc<NodeInfo>],
    memo: &NodeMemo<u32>,
    mut visit: impl FnMut(&NodeInfo, usize, i64),
) {
    let namespace = pod.namespace();
    let mut counted = vec![false; constraints.len()];
    for (first, constraint) in constraints.iter().enumerate() {
        if counted[first] {
            continue;
        }
        let sharing: Vec<usize> = (first..constraints.len())
            .filter(|i| constraints[*i].selector == constraint.selector)
            .collect();
        for i in &sharing {
            counted[*i] = true;
        }
        let selector = &constraint.selector;
        memo.visit(
            &format!("{namespace}\u{0}{selector:?}"),
            nodes.iter(),
            |node| count_matching(node, selector, namespace),
            |node, count| {
                for i in &sharing {
                    visit(node, *i, i64::from(*count));
                }
            },
        );
    }
}

/// Pods on `node` in `namespace`, not terminating, that `selector` selects
/// (those whose label digest rules them out are not read).
fn count_matching(node: &NodeInfo, selector: &LabelMatcher, namespace: &str) -> u32 {
    let need = selector.required_digest();
    let matching = node
        .pod_digests
        .iter()
        .zip(&node.pods)
        .filter(|(digest, p)| {
            label_digest::may_match(**digest, need)
                && !p.is_terminating()
                && p.namespace() == namespace
                && selector.matches(p.labels())
        })
        .count();
    u32::try_from(matching).unwrap_or(u32::MAX)
}

/// Adds `count` to the domain `value` (no allocation when it is known).
pub fn add_to_domain(counts: &mut foldhash::HashMap<String, i64>, value: &str, count: i64) {
    match counts.get_mut(value) {
        Some(total) => *total += count,
        None => {
            counts.insert(value.to_string(), count);
        }
    }
}
