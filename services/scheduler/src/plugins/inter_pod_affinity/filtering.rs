//! InterPodAffinity's Filter: the pod's required affinity must find matching
//! pods in the node's domain, its required anti-affinity must find none, and
//! no existing pod's required anti-affinity may select it there.

use std::collections::HashMap;

use super::namespaces::NamespaceLabels;
use crate::framework::{Snapshot, Status};
use crate::model::{AffinityTerm, NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;

pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// topology key -> value -> pods.
pub type Counts = HashMap<String, foldhash::HashMap<String, i64>>;

#[derive(Clone, Default)]
pub struct FilterState {
    /// Domains where an existing pod's required anti-affinity selects the pod.
    existing_anti_affinity: Counts,
    /// Domains holding pods that match all the pod's required affinity terms.
    affinity: Counts,
    /// Domains holding pods that one of the pod's anti-affinity terms selects.
    anti_affinity: Counts,
    /// Whether the pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

fn bump(counts: &mut Counts, node: &NodeInfo, key: &str, delta: i64) {
    if let Some(value) = node.labels().get(key) {
        add(counts, key, value, delta);
    }
}

fn add(counts: &mut Counts, key: &str, value: &str, delta: i64) {
    let values = match counts.get_mut(key) {
        Some(values) => values,
        None => counts.entry(key.to_string()).or_default(),
    };
    match values.get_mut(value) {
        Some(count) => *count += delta,
        None => {
            values.insert(value.to_string(), delta);
        }
    }
}

fn count_at(counts: &Counts, key: &str, value: &str) -> i64 {
    counts
        .get(key)
        .and_then(|values| values.get(value))
        .copied()
        .unwrap_or(0)
}

impl FilterState {
    pub fn compute(
        pod: &PodInfo,
        snapshot: &Snapshot,
        namespaces: &mut NamespaceLabels,
        memo: &NodeMemo<(Counts, Counts)>,
    ) -> FilterState {
        let mut state = FilterState {
            matches_own_affinity: namespaces.all_match(&pod.required_affinity, pod),
            ..FilterState::default()
        };
        for node in snapshot.with_required_anti_affinity() {
            for existing in &node.pods_with_required_anti_affinity {
                state.count_existing(pod, existing, node, namespaces, 1);
            }
        }
        if pod.required_affinity.is_empty() && pod.required_anti_affinity.is_empty() {
            return state;
        }
        let terms = || {
            pod.required_affinity
                .iter()
                .chain(&pod.required_anti_affinity)
        };
        if terms().any(|t| t.uses_namespace_selector()) {
            // Matches depend on other namespaces' labels: not remembered.
            for node in snapshot.nodes() {
                for existing in &node.pods {
                    state.count_incoming(pod, existing, node, namespaces, 1);
                }
            }
            return state;
        }
        let lister = namespaces.lister();
        let per_node = |node: &NodeInfo| {
            let mut partial = FilterState::default();
            let mut namespaces = NamespaceLabels::new(lister);
            for existing in &node.pods {
                partial.count_incoming(pod, existing, node, &mut namespaces, 1);
            }
            (partial.affinity, partial.anti_affinity)
        };
        let signature = format!(
            "{}\u{0}{:?}\u{0}{:?}",
            pod.namespace(),
            pod.required_affinity,
            pod.required_anti_affinity
        );
        memo.visit(
            &signature,
            snapshot.nodes().iter(),
            per_node,
            |_, (affinity, anti)| {
                merge(&mut state.affinity, affinity);
                merge(&mut state.anti_affinity, anti);
            },
        );
        state
    }

    fn count_existing(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        namespaces: &mut NamespaceLabels,
        delta: i64,
    ) {
        for term in &existing.required_anti_affinity {
            if namespaces.term_matches(term, pod) {
                bump(
                    &mut self.existing_anti_affinity,
                    node,
                    &term.topology_key,
                    delta,
                );
            }
        }
    }

    fn count_incoming(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        namespaces: &mut NamespaceLabels,
        delta: i64,
    ) {
        if !pod.required_affinity.is_empty()
            && namespaces.all_match(&pod.required_affinity, existing)
        {
            for term in &pod.required_affinity {
                bump(&mut self.affinity, node, &term.topology_key, delta);
            }
        }
        for term in &pod.required_anti_affinity {
            if namespaces.term_matches(term, existing) {
                bump(&mut self.anti_affinity, node, &term.topology_key, delta);
            }
        }
    }

    /// Preemption's dry run added (1) or removed (-1) `other` on `node`.
    pub fn update(
        &mut self,
        pod: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        namespaces: &mut NamespaceLabels,
        delta: i64,
    ) {
        self.count_existing(pod, other, node, namespaces, delta);
        self.count_incoming(pod, other, node, namespaces, delta);
    }

    pub fn filter(&self, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !self.satisfies_affinity(pod, node) {
            return Status::unresolvable(REASON_AFFINITY);
        }
        if !self.satisfies_anti_affinity(&pod.required_anti_affinity, node) {
            return Status::unschedulable(REASON_ANTI_AFFINITY);
        }
        if !self.satisfies_existing_anti_affinity(node) {
            return Status::unschedulable(REASON_EXISTING_ANTI_AFFINITY);
        }
        Status::success()
    }

    fn satisfies_affinity(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        let mut pods_exist = true;
        for term in &pod.required_affinity {
            let Some(value) = node.labels().get(&term.topology_key) else {
                return false;
            };
            if count_at(&self.affinity, &term.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        if pods_exist {
            return true;
        }
        // The first pod of a group with affinity to itself: allowed when no
        // pod anywhere matches yet and the pod matches its own terms.
        self.affinity
            .values()
            .flat_map(|v| v.values())
            .all(|c| *c <= 0)
            && self.matches_own_affinity
    }

    fn satisfies_anti_affinity(&self, terms: &[AffinityTerm], node: &NodeInfo) -> bool {
        terms
            .iter()
            .all(|term| match node.labels().get(&term.topology_key) {
                Some(value) => count_at(&self.anti_affinity, &term.topology_key, value) <= 0,
                None => true,
            })
    }

    fn satisfies_existing_anti_affinity(&self, node: &NodeInfo) -> bool {
        let labels = node.labels();
        self.existing_anti_affinity
            .iter()
            .all(|(key, values)| match labels.get(key) {
                Some(value) => values.get(value).is_none_or(|count| *count <= 0),
                None => true,
            })
    }
}

fn merge(total: &mut Counts, part: &Counts) {
    for (key, values) in part {
        for (value, count) in values {
            add(total, key, value, *count);
        }
    }
}
