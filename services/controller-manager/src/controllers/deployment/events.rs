//! ReplicaSet and pod events as the deployment controller reads them
//! (kube's addReplicaSet, updateReplicaSet, deleteReplicaSet, deletePod).

use capstan_client::informer::{key_from, key_of, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;
use kube::core::{Selector, SelectorExt};

use crate::ownership::controller_of;

#[derive(Clone)]
pub struct Handler {
    pub deployments: Store<Deployment>,
    pub replica_sets: Store<ReplicaSet>,
    pub queue: WorkQueue<String>,
}

impl Handler {
    /// The key of the cached owner of `kind` that controls `meta`.
    fn owner<K: kube::Resource + 'static>(
        &self,
        store: &Store<K>,
        meta: &ObjectMeta,
        kind: &str,
    ) -> Option<String> {
        let reference = controller_of(meta).filter(|r| r.kind == kind)?;
        let key = key_from(meta.namespace.as_deref(), &reference.name);
        let owner = store.get_by_key(&key)?;
        (owner.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(key)
    }

    fn matching_deployments(&self, rs: &ReplicaSet) -> Vec<String> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or_default();
        let labels = rs.metadata.labels.clone().unwrap_or_default();
        self.deployments
            .list_namespace(namespace)
            .iter()
            .filter(|d| {
                let selector = d
                    .spec
                    .as_ref()
                    .map(|s| s.selector.clone())
                    .unwrap_or_default();
                Selector::try_from(selector).is_ok_and(|s| !s.selects_all() && s.matches(&labels))
            })
            .map(|d| key_of(d.as_ref()))
            .collect()
    }

    pub fn replica_set(&self, event: &InformerEvent<ReplicaSet>) {
        let (old, new) = match event {
            InformerEvent::Added(rs) | InformerEvent::Deleted(rs) => (None, rs),
            InformerEvent::Updated { old, new } => (Some(old), new),
        };
        if let Some(old) = old {
            if controller_of(&old.metadata) != controller_of(&new.metadata) {
                if let Some(key) = self.owner(&self.deployments, &old.metadata, "Deployment") {
                    self.queue.add(key);
                }
            }
        }
        if let Some(key) = self.owner(&self.deployments, &new.metadata, "Deployment") {
            return self.queue.add(key);
        }
        let deleted = matches!(event, InformerEvent::Deleted(_));
        let labels_changed = old.is_some_and(|o| o.metadata.labels != new.metadata.labels);
        if controller_of(&new.metadata).is_none() && !deleted && (old.is_none() || labels_changed) {
            for key in self.matching_deployments(new) {
                self.queue.add(key);
            }
        }
    }

    /// A pod gone lets a Recreate rollout go on.
    pub fn pod(&self, event: &InformerEvent<Pod>) {
        let InformerEvent::Deleted(pod) = event else {
            return;
        };
        let Some(rs_key) = self.owner(&self.replica_sets, &pod.metadata, "ReplicaSet") else {
            return;
        };
        let Some(rs) = self.replica_sets.get_by_key(&rs_key) else {
            return;
        };
        if let Some(key) = self.owner(&self.deployments, &rs.metadata, "Deployment") {
            self.queue.add(key);
        }
    }
}
