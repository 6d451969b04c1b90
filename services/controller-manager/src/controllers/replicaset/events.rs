//! Pod events as the ReplicaSet controller reads them (kube's addPod,
//! updatePod, deletePod): a pod's controller learns of it, and its
//! expectations are lowered; an orphan wakes every owner that could
//! adopt it.

use std::time::Duration;

use capstan_client::informer::{key_from, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::Pod;
use kube::core::SelectorExt;

use super::kind::Replicated;
use crate::expectations::Expectations;
use crate::ownership::controller_of;
use crate::pods;

pub struct PodEvents<K: Replicated> {
    pub owners: Store<K>,
    pub expectations: Expectations,
    pub queue: WorkQueue<String>,
}

impl<K: Replicated> PodEvents<K> {
    pub fn handle(&self, event: &InformerEvent<Pod>) {
        match event {
            InformerEvent::Added(pod) => self.added(pod),
            InformerEvent::Updated { old, new } => self.updated(old, new),
            InformerEvent::Deleted(pod) => self.deleted(pod),
        }
    }

    /// The key of the owner of type `K` that controls `pod`, if cached
    /// (a controller reference names the owner; the UID must match too).
    fn owner_key(&self, pod: &Pod) -> Option<String> {
        let reference = controller_of(&pod.metadata)?;
        if reference.kind != K::kind(&()) {
            return None;
        }
        let key = key_from(pod.metadata.namespace.as_deref(), &reference.name);
        let owner = self.owners.get_by_key(&key)?;
        (owner.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(key)
    }

    /// Owners in the pod's namespace whose selector matches its labels.
    fn matching_owners(&self, pod: &Pod) -> Vec<String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        self.owners
            .list_namespace(namespace)
            .iter()
            .filter(|o| o.selector().is_ok_and(|s| s.matches(&labels)))
            .map(|o| {
                key_from(
                    o.meta().namespace.as_deref(),
                    o.meta().name.as_deref().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn added(&self, pod: &Pod) {
        if pods::is_terminating(pod) {
            // Seen for the first time already going (e.g. after a restart).
            return self.deleted(pod);
        }
        if let Some(key) = self.owner_key(pod) {
            self.expectations.creation_observed(&key);
            return self.queue.add(key);
        }
        if controller_of(&pod.metadata).is_none() {
            for key in self.matching_owners(pod) {
                self.queue.add(key);
            }
        }
    }

    fn updated(&self, old: &Pod, new: &Pod) {
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if pods::is_terminating(new) {
            // A graceful deletion: observed now, not when the pod is gone.
            self.deleted(new);
            if labels_changed {
                self.deleted(old);
            }
            return;
        }
        let old_ref = controller_of(&old.metadata);
        let new_ref = controller_of(&new.metadata);
        if old_ref != new_ref {
            if let Some(key) = self.owner_key(old) {
                self.queue.add(key);
            }
        }
        if let Some(key) = self.owner_key(new) {
            self.queue.add(key.clone());
            self.recheck_when_available(key, old, new);
            return;
        }
        if new_ref.is_none() && (labels_changed || old_ref != new_ref) {
            for key in self.matching_owners(new) {
                self.queue.add(key);
            }
        }
    }

    /// A pod just became ready counts as available after minReadySeconds.
    fn recheck_when_available(&self, key: String, old: &Pod, new: &Pod) {
        if pods::is_ready(old) || !pods::is_ready(new) {
            return;
        }
        let min_ready = self
            .owners
            .get_by_key(&key)
            .map_or(0, |o| o.min_ready_seconds());
        if min_ready > 0 {
            let wait = Duration::from_secs(min_ready as u64 + 1);
            self.queue.add_after(key, wait);
        }
    }

    fn deleted(&self, pod: &Pod) {
        let Some(key) = self.owner_key(pod) else {
            return;
        };
        if let Some(uid) = pod.metadata.uid.as_deref() {
            self.expectations.deletion_observed(&key, uid);
        }
        self.queue.add(key);
    }
}
