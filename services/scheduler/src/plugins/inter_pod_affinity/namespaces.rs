//! Namespace labels looked up once per namespace per cycle, and only when a
//! term has a namespace selector.

use std::collections::HashMap;

use crate::framework::ClusterLister;
use crate::model::{AffinityTerm, Labels, PodInfo};

pub struct NamespaceLabels<'a> {
    lister: &'a dyn ClusterLister,
    cache: HashMap<String, Labels>,
}

static EMPTY: Labels = Labels::new();

impl<'a> NamespaceLabels<'a> {
    pub fn new(lister: &'a dyn ClusterLister) -> NamespaceLabels<'a> {
        NamespaceLabels {
            lister,
            cache: HashMap::new(),
        }
    }

    pub fn lister(&self) -> &'a dyn ClusterLister {
        self.lister
    }

    /// Whether `term` selects `pod`.
    pub fn term_matches(&mut self, term: &AffinityTerm, pod: &PodInfo) -> bool {
        if !term.uses_namespace_selector() {
            return term.matches(&pod.pod, &EMPTY);
        }
        let namespace = pod.namespace();
        if !self.cache.contains_key(namespace) {
            self.cache.insert(
                namespace.to_string(),
                self.lister.namespace_labels(namespace),
            );
        }
        term.matches(&pod.pod, &self.cache[namespace])
    }

    /// Whether every term selects `pod` (how an existing pod counts for required affinity).
    pub fn all_match(&mut self, terms: &[AffinityTerm], pod: &PodInfo) -> bool {
        terms.iter().all(|t| self.term_matches(t, pod))
    }
}
