//! The scheduler cache: every node with the pods on it (bound, and assumed
//! while their binding is in flight), kept incrementally, and the snapshot
//! each cycle takes of it, copying only the nodes that changed.
//!
//! A pod's life here: `assume` (the cycle chose a node; its resources count
//! at once, so the next cycle cannot over-commit that node) ->
//! `finish_binding` (the API accepted the binding; the assumption now expires
//! after `ttl` unless the watch confirms it) -> `add_pod` from the watch
//! (confirmed). A failed binding is `forget`-ten.

mod node_tree;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use thiserror::Error;

use crate::framework::Snapshot;
use crate::model::{NodeInfo, PodInfo};
pub use node_tree::NodeTree;

/// How long an assumed pod whose binding succeeded waits for the watch to
/// confirm it before the cache drops it. Long, because dropping it early
/// frees its resources while it may in fact run there (kube stopped
/// expiring them at all for that reason); finite, so that a binding the API
/// accepted but never published cannot hold resources forever.
pub const DEFAULT_ASSUMED_POD_TTL: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("pod {0} is already in the cache, so can't be assumed")]
    AlreadyPresent(String),
    #[error("pod {0} is not assumed")]
    NotAssumed(String),
    #[error("pod {0} has no node")]
    NoNode(String),
}

struct PodState {
    pod: Arc<PodInfo>,
    node: String,
    assumed: bool,
    /// Set when the binding finished: the assumption expires then.
    deadline: Option<Instant>,
}

struct NodeEntry {
    info: Arc<NodeInfo>,
    /// False while the cache knows pods on this node but not the Node itself.
    has_node: bool,
}

pub struct Cache {
    nodes: HashMap<String, NodeEntry>,
    pods: HashMap<String, PodState>,
    tree: NodeTree,
    image_nodes: HashMap<String, usize>,
    generation: u64,
    /// Nodes changed since the last snapshot update.
    dirty: HashSet<String>,
    /// The set of nodes changed: the snapshot's list is rebuilt.
    order_dirty: bool,
    images_dirty: bool,
    ttl: Duration,
}

impl Cache {
    pub fn new(ttl: Duration) -> Cache {
        Cache {
            nodes: HashMap::new(),
            pods: HashMap::new(),
            tree: NodeTree::default(),
            image_nodes: HashMap::new(),
            generation: 0,
            dirty: HashSet::new(),
            order_dirty: true,
            images_dirty: true,
            ttl,
        }
    }

    fn touch(&mut self, name: &str) -> &mut NodeInfo {
        self.generation += 1;
        self.dirty.insert(name.to_string());
        let generation = self.generation;
        let entry = self
            .nodes
            .entry(name.to_string())
            .or_insert_with(|| NodeEntry {
                info: Arc::new(NodeInfo::new(placeholder_node(name), generation)),
                has_node: false,
            });
        let info = Arc::make_mut(&mut entry.info);
        info.generation = generation;
        info
    }

    pub fn node_count(&self) -> usize {
        self.tree.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|p| p.assumed)
    }

    /// Whether the cache holds the pod (assumed or confirmed).
    pub fn contains_pod(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// The cycle chose `node` for `pod`: count it there now.
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        if self.pods.contains_key(&pod.key) {
            return Err(CacheError::AlreadyPresent(pod.full_name()));
        }
        self.touch(node).add_pod(pod.clone());
        self.pods.insert(
            pod.key.clone(),
            PodState {
                pod,
                node: node.to_string(),
                assumed: true,
                deadline: None,
            },
        );
        Ok(())
    }

    /// The API accepted the binding: start the assumption's expiry clock.
    pub fn finish_binding(&mut self, key: &str, now: Instant) {
        let ttl = self.ttl;
        if let Some(state) = self.pods.get_mut(key).filter(|s| s.assumed) {
            state.deadline = Some(now + ttl);
        }
    }

    /// The binding failed: drop the assumption.
    pub fn forget(&mut self, key: &str) -> Result<(), CacheError> {
        match self.pods.get(key) {
            Some(state) if state.assumed => {
                let node = state.node.clone();
                self.pods.remove(key);
                self.touch(&node).remove_pod(key);
                Ok(())
            }
            _ => Err(CacheError::NotAssumed(key.to_string())),
        }
    }

    /// A bound pod seen through the watch (confirming an assumption, or new).
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let node = pod
            .node_name()
            .ok_or_else(|| CacheError::NoNode(pod.full_name()))?
            .to_string();
        if let Some(state) = self.pods.get(&pod.key) {
            let old_node = state.node.clone();
            self.touch(&old_node).remove_pod(&pod.key);
        }
        self.touch(&node).add_pod(pod.clone());
        self.pods.insert(
            pod.key.clone(),
            PodState {
                pod,
                node,
                assumed: false,
                deadline: None,
            },
        );
        Ok(())
    }

    /// A bound pod changed (labels, resources on resize, deletion timestamp).
    pub fn update_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        self.add_pod(pod)
    }

    pub fn remove_pod(&mut self, key: &str) {
        if let Some(state) = self.pods.remove(key) {
            self.touch(&state.node).remove_pod(key);
        }
    }

    /// The pod as the cache holds it (assumed or confirmed).
    pub fn pod(&self, key: &str) -> Option<&Arc<PodInfo>> {
        self.pods.get(key).map(|s| &s.pod)
    }

    pub fn add_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.tree.add(&node);
        let old_images: Vec<String> = self
            .nodes
            .get(&name)
            .map(|e| e.info.images.keys().cloned().collect())
            .unwrap_or_default();
        self.touch(&name).set_node(node);
        let entry = self.nodes.get_mut(&name).expect("touched");
        let was_known = std::mem::replace(&mut entry.has_node, true);
        let new_images: Vec<String> = entry.info.images.keys().cloned().collect();
        if !was_known {
            self.order_dirty = true;
        }
        self.swap_images(&old_images, &new_images);
    }

    pub fn update_node(&mut self, node: Arc<Node>) {
        self.add_node(node);
    }

    pub fn remove_node(&mut self, name: &str) {
        self.tree.remove(name);
        self.order_dirty = true;
        let Some(entry) = self.nodes.get(name) else {
            return;
        };
        let images: Vec<String> = entry.info.images.keys().cloned().collect();
        let has_pods = !entry.info.pods.is_empty();
        self.swap_images(&images, &[]);
        // Pods still bound to it stay counted until their own deletions arrive.
        if !has_pods {
            self.nodes.remove(name);
        } else {
            self.nodes.get_mut(name).expect("present").has_node = false;
        }
        self.generation += 1;
    }

    fn swap_images(&mut self, old: &[String], new: &[String]) {
        if old == new {
            return;
        }
        for image in old {
            if let Some(count) = self.image_nodes.get_mut(image) {
                *count -= 1;
                if *count == 0 {
                    self.image_nodes.remove(image);
                }
            }
        }
        for image in new {
            *self.image_nodes.entry(image.clone()).or_insert(0) += 1;
        }
        self.images_dirty = true;
    }

    /// Drops assumed pods whose binding finished more than the TTL ago and
    /// that the watch never confirmed; returns them.
    pub fn cleanup_expired(&mut self, now: Instant) -> Vec<Arc<PodInfo>> {
        let expired: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, s)| s.assumed && s.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        let mut dropped = Vec::new();
        for key in expired {
            if let Some(state) = self.pods.remove(&key) {
                self.touch(&state.node).remove_pod(&key);
                dropped.push(state.pod);
            }
        }
        dropped
    }

    /// Brings `snapshot` up to date, copying only what changed since.
    pub fn update_snapshot(&mut self, snapshot: &mut Snapshot) {
        if self.order_dirty {
            let list = self
                .tree
                .list()
                .into_iter()
                .filter_map(|n| self.nodes.get(&n))
                .map(|e| e.info.clone())
                .collect();
            *snapshot = Snapshot::new(list, self.generation);
            self.order_dirty = false;
            self.images_dirty = true;
        } else if !self.dirty.is_empty() {
            for name in &self.dirty {
                if let (Some(position), Some(entry)) =
                    (snapshot.position(name), self.nodes.get(name))
                {
                    snapshot.replace(position, entry.info.clone());
                }
            }
            snapshot.refresh_affinity_lists();
        }
        self.dirty.clear();
        if self.images_dirty {
            snapshot.image_nodes = Arc::new(self.image_nodes.clone());
            self.images_dirty = false;
        }
        snapshot.generation = self.generation;
    }

    /// The node's info as the cache holds it now.
    pub fn node(&self, name: &str) -> Option<Arc<NodeInfo>> {
        self.nodes
            .get(name)
            .filter(|e| e.has_node)
            .map(|e| e.info.clone())
    }
}

fn placeholder_node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    })
}

#[cfg(test)]
mod tests;
