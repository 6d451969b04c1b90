//! Pod events as the StatefulSet and DaemonSet controllers read them
//! (kube's addPod, updatePod, deletePod): the owner a pod names as its
//! controller has its expectations lowered and is queued; an orphan
//! queues every owner whose selector matches it, to adopt it.

use capstan_client::informer::{key_from, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::Pod;
use kube::core::{Selector, SelectorExt};
use kube::Resource;

use crate::expectations::Expectations;
use crate::ownership::controller_of;
use crate::pods;

pub struct PodEvents<K: Resource> {
    pub owners: Store<K>,
    /// The owner's selector, if valid.
    pub selector: fn(&K) -> Option<Selector>,
    pub expectations: Expectations,
    pub queue: WorkQueue<String>,
}

impl<K: Resource<DynamicType = ()> + 'static> PodEvents<K> {
    pub fn handle(&self, event: &InformerEvent<Pod>) {
        match event {
            InformerEvent::Added(pod) if pods::is_terminating(pod) => self.deleted(pod),
            InformerEvent::Added(pod) => {
                if let Some(key) = self.owner_key(pod) {
                    self.expectations.creation_observed(&key);
                    self.queue.add(key);
                } else if controller_of(&pod.metadata).is_none() {
                    self.orphan(pod);
                }
            }
            InformerEvent::Updated { old, new } => self.updated(old, new),
            InformerEvent::Deleted(pod) => self.deleted(pod),
        }
    }

    /// The key of the cached owner of type `K` controlling `pod`.
    fn owner_key(&self, pod: &Pod) -> Option<String> {
        let reference = controller_of(&pod.metadata)?;
        if reference.kind != K::kind(&()) {
            return None;
        }
        let key = key_from(pod.metadata.namespace.as_deref(), &reference.name);
        let owner = self.owners.get_by_key(&key)?;
        (owner.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(key)
    }

    fn orphan(&self, pod: &Pod) {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        for owner in self.owners.list_namespace(namespace) {
            if (self.selector)(&owner).is_some_and(|s| s.matches(&labels)) {
                let meta = owner.meta();
                let name = meta.name.as_deref().unwrap_or_default();
                self.queue.add(key_from(meta.namespace.as_deref(), name));
            }
        }
    }

    fn updated(&self, old: &Pod, new: &Pod) {
        if pods::is_terminating(new) && !pods::is_terminating(old) {
            // A graceful deletion: observed now, not when the pod is gone.
            return self.deleted(new);
        }
        if controller_of(&old.metadata) != controller_of(&new.metadata) {
            if let Some(key) = self.owner_key(old) {
                self.queue.add(key);
            }
        }
        match self.owner_key(new) {
            Some(key) => self.queue.add(key),
            None if controller_of(&new.metadata).is_none() => self.orphan(new),
            None => {}
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
