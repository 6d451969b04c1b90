//! What the informers tell the scheduler: pods and nodes added, updated,
//! deleted. Bound pods go to the cache, pending pods this scheduler is
//! responsible for go to the queue, and each change is turned into the
//! cluster event that may help unschedulable pods.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};

use super::scheduler::Scheduler;
use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::model::{labels_of, PodInfo};

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Succeeded and Failed pods use no resources.
fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

fn nominated_node(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .nominated_node_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

impl Scheduler {
    pub fn on_pod_added(&self, pod: Arc<Pod>) {
        if is_bound(&pod) {
            if is_terminal(&pod) {
                return;
            }
            let info = PodInfo::new(pod);
            self.queue.delete(&info.key);
            let _ = self.cache.lock().add_pod(info.clone());
            self.queue.assigned_pod_added(&info);
            return;
        }
        let info = PodInfo::new(pod);
        if !self.profiles.responsible_for(&info) || info.is_terminating() || is_terminal(&info.pod)
        {
            return;
        }
        if let Some(node) = nominated_node(&info.pod) {
            self.queue.nominate(info.clone(), node);
        }
        self.queue.add(info);
    }

    pub fn on_pod_updated(&self, old: Arc<Pod>, new: Arc<Pod>) {
        match (is_bound(&old), is_bound(&new)) {
            (_, true) if is_terminal(&new) => self.on_pod_deleted(new),
            (false, true) => self.on_pod_added(new),
            (true, true) => {
                let mut action = ActionType::UPDATE_OTHER;
                if labels_of(&old.metadata.labels) != labels_of(&new.metadata.labels) {
                    action = action.or(ActionType::UPDATE_POD_LABEL);
                }
                let _ = self.cache.lock().update_pod(PodInfo::new(new));
                self.queue
                    .move_all(ClusterEvent::new(EventResource::AssignedPod, action));
            }
            (_, false) => {
                let old_info = PodInfo::new(old);
                let info = PodInfo::new(new);
                if !self.profiles.responsible_for(&info) || info.is_terminating() {
                    self.queue.delete(&info.key);
                    return;
                }
                match nominated_node(&info.pod) {
                    Some(node) => self.queue.nominate(info.clone(), node),
                    None => self.queue.clear_nomination(&info.key),
                }
                self.queue.update(&old_info, info);
            }
        }
    }

    pub fn on_pod_deleted(&self, pod: Arc<Pod>) {
        let key = crate::model::pod_key(&pod);
        if is_bound(&pod) {
            self.cache.lock().remove_pod(&key);
            self.queue.move_all(ClusterEvent::new(
                EventResource::AssignedPod,
                ActionType::DELETE,
            ));
        } else {
            self.queue.delete(&key);
        }
    }

    pub fn on_node_added(&self, node: Arc<Node>) {
        self.cache.lock().add_node(node);
        self.queue
            .move_all(ClusterEvent::new(EventResource::Node, ActionType::ADD));
    }

    pub fn on_node_updated(&self, old: Arc<Node>, new: Arc<Node>) {
        let action = node_update_action(&old, &new);
        self.cache.lock().update_node(new);
        if action != ActionType(0) {
            self.queue
                .move_all(ClusterEvent::new(EventResource::Node, action));
        }
    }

    pub fn on_node_deleted(&self, node: Arc<Node>) {
        self.cache
            .lock()
            .remove_node(node.metadata.name.as_deref().unwrap_or_default());
        self.queue
            .move_all(ClusterEvent::new(EventResource::Node, ActionType::DELETE));
    }

    /// Any other change that may matter (namespace labels, for affinity's
    /// namespace selectors).
    pub fn on_cluster_event(&self, event: ClusterEvent) {
        self.queue.move_all(event);
    }
}

/// kube's node update event: which scheduling-relevant parts changed.
fn node_update_action(old: &Node, new: &Node) -> ActionType {
    let mut action = ActionType(0);
    let allocatable = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    if allocatable(old) != allocatable(new) {
        action = action.or(ActionType::UPDATE_NODE_ALLOCATABLE);
    }
    if old.metadata.labels != new.metadata.labels {
        action = action.or(ActionType::UPDATE_NODE_LABEL);
    }
    let taints = |n: &Node| n.spec.as_ref().and_then(|s| s.taints.clone());
    let unschedulable = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    };
    if taints(old) != taints(new) || unschedulable(old) != unschedulable(new) {
        action = action.or(ActionType::UPDATE_NODE_TAINT);
    }
    let conditions = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|c| {
                c.iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect::<Vec<_>>()
            })
    };
    if conditions(old) != conditions(new) {
        action = action.or(ActionType::UPDATE_NODE_CONDITION);
    }
    action
}
