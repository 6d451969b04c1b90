//! InterPodAffinity's Score: preferred (anti-)affinity of the pod toward
//! existing pods, and of existing pods toward it (their required affinity
//! counting `hardPodAffinityWeight`), summed per topology domain.

use std::collections::HashMap;
use std::sync::Arc;

use super::namespaces::NamespaceLabels;
use crate::framework::{Snapshot, MAX_NODE_SCORE};
use crate::model::{NodeInfo, PodInfo, WeightedTerm};
use crate::plugins::memo::NodeMemo;

/// topology key -> value -> score.
pub type TopologyScore = HashMap<String, HashMap<String, i64>>;

#[derive(Clone, Default)]
pub struct ScoreState {
    pub topology_score: TopologyScore,
}

pub struct ScoreArgs {
    pub hard_pod_affinity_weight: i64,
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl ScoreState {
    pub fn compute(
        pod: &PodInfo,
        snapshot: &Snapshot,
        args: &ScoreArgs,
        namespaces: &mut NamespaceLabels,
        memo: &NodeMemo<TopologyScore>,
    ) -> ScoreState {
        let mut state = ScoreState::default();
        let has_preferences =
            !pod.preferred_affinity.is_empty() || !pod.preferred_anti_affinity.is_empty();
        let nodes: Box<dyn Iterator<Item = &Arc<NodeInfo>>> = if has_preferences {
            Box::new(snapshot.nodes().iter())
        } else {
            Box::new(snapshot.with_affinity())
        };
        let own_terms = || {
            pod.preferred_affinity
                .iter()
                .chain(&pod.preferred_anti_affinity)
        };
        if own_terms().any(|t| t.term.uses_namespace_selector()) {
            // Matches depend on other namespaces' labels: not remembered.
            for node in nodes {
                state.process_node(pod, node, args, has_preferences, namespaces);
            }
            return state;
        }
        let lister = namespaces.lister();
        let per_node = |node: &NodeInfo| {
            let mut partial = ScoreState::default();
            partial.process_node(
                pod,
                node,
                args,
                has_preferences,
                &mut NamespaceLabels::new(lister),
            );
            partial.topology_score
        };
        // The question: this pod (namespace, its namespace's labels, labels, terms) and the arguments.
        let signature = format!(
            "{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{}",
            pod.namespace(),
            lister.namespace_labels(pod.namespace()),
            pod.labels(),
            pod.preferred_affinity,
            pod.preferred_anti_affinity,
            args.hard_pod_affinity_weight,
            args.ignore_preferred_terms_of_existing_pods
        );
        memo.visit(&signature, nodes, per_node, |_, partial| {
            for (key, values) in partial {
                let total = state.topology_score.entry(key.clone()).or_default();
                for (value, amount) in values {
                    match total.get_mut(value) {
                        Some(sum) => *sum += amount,
                        None => {
                            total.insert(value.clone(), *amount);
                        }
                    }
                }
            }
        });
        state.topology_score.retain(|_, values| !values.is_empty());
        state
    }

    fn process_node(
        &mut self,
        pod: &PodInfo,
        node: &NodeInfo,
        args: &ScoreArgs,
        has_preferences: bool,
        namespaces: &mut NamespaceLabels,
    ) {
        if node.labels().is_empty() {
            return;
        }
        let existing_pods = if has_preferences {
            &node.pods
        } else {
            &node.pods_with_affinity
        };
        for existing in existing_pods {
            self.process_existing(pod, existing, node, args, namespaces);
        }
    }

    fn process_existing(
        &mut self,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        args: &ScoreArgs,
        namespaces: &mut NamespaceLabels,
    ) {
        self.process_weighted(&pod.preferred_affinity, existing, node, 1, namespaces);
        self.process_weighted(&pod.preferred_anti_affinity, existing, node, -1, namespaces);
        if args.hard_pod_affinity_weight > 0 {
            for term in &existing.required_affinity {
                if namespaces.term_matches(term, pod) {
                    self.add(node, &term.topology_key, args.hard_pod_affinity_weight);
                }
            }
        }
        if !args.ignore_preferred_terms_of_existing_pods {
            self.process_weighted(&existing.preferred_affinity, pod, node, 1, namespaces);
            self.process_weighted(&existing.preferred_anti_affinity, pod, node, -1, namespaces);
        }
    }

    /// For each term selecting `target`, adds its weight to the domain of `node`.
    fn process_weighted(
        &mut self,
        terms: &[WeightedTerm],
        target: &PodInfo,
        node: &NodeInfo,
        sign: i64,
        namespaces: &mut NamespaceLabels,
    ) {
        for weighted in terms {
            if namespaces.term_matches(&weighted.term, target) {
                self.add(
                    node,
                    &weighted.term.topology_key,
                    sign * i64::from(weighted.weight),
                );
            }
        }
    }

    fn add(&mut self, node: &NodeInfo, key: &str, amount: i64) {
        if let Some(value) = node.labels().get(key) {
            *self
                .topology_score
                .entry(key.to_string())
                .or_default()
                .entry(value.clone())
                .or_insert(0) += amount;
        }
    }

    pub fn score(&self, node: &NodeInfo) -> i64 {
        let labels = node.labels();
        self.topology_score
            .iter()
            .filter_map(|(key, values)| values.get(labels.get(key)?))
            .sum()
    }

    /// Min-max onto 0..=100.
    pub fn normalize(&self, scores: &mut [i64]) {
        if self.topology_score.is_empty() {
            return;
        }
        let min = scores.iter().copied().min().unwrap_or(0);
        let max = scores.iter().copied().max().unwrap_or(0);
        let span = max - min;
        for score in scores.iter_mut() {
            *score = if span > 0 {
                (MAX_NODE_SCORE as f64 * ((*score - min) as f64 / span as f64)) as i64
            } else {
                0
            };
        }
    }
}
