//! Pods nominated to nodes by preemption (`status.nominatedNodeName`), which
//! later cycles count on those nodes when they outrank the pod at hand.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::PodInfo;

#[derive(Default, Clone)]
pub struct Nominator {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<String, String>,
}

impl Nominator {
    /// Records `pod` as nominated to `node` (replacing an earlier nomination).
    pub fn add(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.remove(&pod.key);
        if node.is_empty() {
            return;
        }
        self.node_of.insert(pod.key.clone(), node.to_string());
        self.by_node.entry(node.to_string()).or_default().push(pod);
    }

    pub fn remove(&mut self, key: &str) {
        let Some(node) = self.node_of.remove(key) else {
            return;
        };
        if let Some(pods) = self.by_node.get_mut(&node) {
            pods.retain(|p| p.key != key);
            if pods.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    pub fn nominated_for(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.by_node.get(node).cloned().unwrap_or_default()
    }

    pub fn node_of(&self, key: &str) -> Option<&str> {
        self.node_of.get(key).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.node_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }
}
