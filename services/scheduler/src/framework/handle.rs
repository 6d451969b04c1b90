//! What plugins may read of the cluster beyond nodes and pods: namespace
//! labels (affinity's namespace selectors) and the selectors of the workloads
//! that own a pod (PodTopologySpread's default constraints). The wiring
//! answers from informer caches; tests use `StaticLister`.

use std::collections::HashMap;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use crate::model::{LabelMatcher, Labels};

pub trait ClusterLister: Send + Sync {
    /// The labels of namespace `name` (empty if unknown).
    fn namespace_labels(&self, name: &str) -> Labels;

    /// Selectors of the Services, ReplicationControllers, ReplicaSets and
    /// StatefulSets in the pod's namespace that select it (kube's
    /// `DefaultSelector`).
    fn workload_selectors(&self, pod: &Pod) -> Vec<LabelMatcher>;

    /// Every PodDisruptionBudget (preemption spares the pods they protect).
    fn disruption_budgets(&self) -> Vec<Arc<PodDisruptionBudget>> {
        Vec::new()
    }
}

/// A lister answering from fixed data.
#[derive(Debug, Default, Clone)]
pub struct StaticLister {
    pub namespaces: HashMap<String, Labels>,
    /// Per namespace, selectors of its workloads (Services, ReplicaSets, ...).
    pub workloads: HashMap<String, Vec<LabelMatcher>>,
    pub budgets: Vec<Arc<PodDisruptionBudget>>,
}

impl ClusterLister for StaticLister {
    fn namespace_labels(&self, name: &str) -> Labels {
        self.namespaces.get(name).cloned().unwrap_or_default()
    }

    fn workload_selectors(&self, pod: &Pod) -> Vec<LabelMatcher> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = crate::model::labels_of(&pod.metadata.labels);
        self.workloads
            .get(namespace)
            .into_iter()
            .flatten()
            .filter(|selector| selector.matches(labels))
            .cloned()
            .collect()
    }

    fn disruption_budgets(&self) -> Vec<Arc<PodDisruptionBudget>> {
        self.budgets.clone()
    }
}
