//! `ClusterLister` over informer caches: namespace labels, the selectors of
//! a pod's Services, ReplicationControllers, ReplicaSets and StatefulSets,
//! and the PodDisruptionBudgets.

use std::sync::Arc;

use capstan_client::informer::{Informers, Store};
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::framework::ClusterLister;
use crate::model::{labels_of, LabelMatcher, Labels};

pub struct InformerLister {
    namespaces: Store<Namespace>,
    services: Store<Service>,
    controllers: Store<ReplicationController>,
    replica_sets: Store<ReplicaSet>,
    stateful_sets: Store<StatefulSet>,
    budgets: Store<PodDisruptionBudget>,
}

impl InformerLister {
    pub fn new(informers: &Informers) -> InformerLister {
        InformerLister {
            namespaces: informers.get::<Namespace>().store(),
            services: informers.get::<Service>().store(),
            controllers: informers.get::<ReplicationController>().store(),
            replica_sets: informers.get::<ReplicaSet>().store(),
            stateful_sets: informers.get::<StatefulSet>().store(),
            budgets: informers.get::<PodDisruptionBudget>().store(),
        }
    }
}

/// A map selector, unless empty (an empty Service selector selects nothing here).
fn from_map(selector: Option<&Labels>) -> Option<LabelMatcher> {
    selector
        .filter(|s| !s.is_empty())
        .map(LabelMatcher::from_map)
}

impl ClusterLister for InformerLister {
    fn namespace_labels(&self, name: &str) -> Labels {
        self.namespaces
            .get(None, name)
            .map(|ns| labels_of(&ns.metadata.labels).clone())
            .unwrap_or_default()
    }

    fn workload_selectors(&self, pod: &Pod) -> Vec<LabelMatcher> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = labels_of(&pod.metadata.labels);
        let mut selectors: Vec<LabelMatcher> = Vec::new();
        selectors.extend(
            self.services
                .list_namespace(namespace)
                .iter()
                .filter_map(|s| from_map(s.spec.as_ref()?.selector.as_ref())),
        );
        selectors.extend(
            self.controllers
                .list_namespace(namespace)
                .iter()
                .filter_map(|c| from_map(c.spec.as_ref()?.selector.as_ref())),
        );
        selectors.extend(
            self.replica_sets
                .list_namespace(namespace)
                .iter()
                .filter_map(|r| Some(LabelMatcher::new(Some(&r.spec.as_ref()?.selector)))),
        );
        selectors.extend(
            self.stateful_sets
                .list_namespace(namespace)
                .iter()
                .filter_map(|s| Some(LabelMatcher::new(Some(&s.spec.as_ref()?.selector)))),
        );
        selectors.retain(|s| {
            !s.is_nothing() && !matches!(s, LabelMatcher::Everything) && s.matches(labels)
        });
        selectors
    }

    fn disruption_budgets(&self) -> Vec<Arc<PodDisruptionBudget>> {
        self.budgets.list()
    }
}
