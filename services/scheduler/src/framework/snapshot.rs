//! A read-only picture of the cluster for one scheduling cycle: every node's
//! `NodeInfo` (shared `Arc`s, so taking it copies only what changed), in the
//! order the cycle walks them (zones interleaved, as kube's node tree).

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::NodeInfo;

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
    /// Nodes holding a pod with (anti-)affinity terms.
    with_affinity: Vec<usize>,
    /// Nodes holding a pod with required anti-affinity.
    with_required_anti_affinity: Vec<usize>,
    /// How many nodes have each image (ImageLocality's spread).
    pub image_nodes: Arc<HashMap<String, usize>>,
    /// The cache generation this snapshot reflects.
    pub generation: u64,
}

impl Snapshot {
    /// A snapshot of `nodes`, in that order.
    pub fn new(nodes: Vec<Arc<NodeInfo>>, generation: u64) -> Snapshot {
        let mut snapshot = Snapshot {
            nodes,
            generation,
            ..Default::default()
        };
        snapshot.reindex();
        snapshot
    }

    /// For tests: a snapshot of owned `NodeInfo`s.
    pub fn from_infos(nodes: Vec<NodeInfo>) -> Snapshot {
        let mut image_nodes = HashMap::new();
        for node in &nodes {
            for image in node.images.keys() {
                *image_nodes.entry(image.clone()).or_insert(0) += 1;
            }
        }
        let mut snapshot = Snapshot::new(nodes.into_iter().map(Arc::new).collect(), 1);
        snapshot.image_nodes = Arc::new(image_nodes);
        snapshot
    }

    /// Rebuilds the name index and the affinity lists after the node list changed.
    pub fn reindex(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        self.refresh_affinity_lists();
    }

    /// Replaces one node's info in place (same position).
    pub fn replace(&mut self, position: usize, info: Arc<NodeInfo>) {
        self.nodes[position] = info;
    }

    pub fn refresh_affinity_lists(&mut self) {
        self.with_affinity = positions(&self.nodes, |n| !n.pods_with_affinity.is_empty());
        self.with_required_anti_affinity = positions(&self.nodes, |n| {
            !n.pods_with_required_anti_affinity.is_empty()
        });
    }

    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.position(name).map(|i| &self.nodes[i])
    }

    pub fn with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_affinity.iter().map(|i| &self.nodes[*i])
    }

    pub fn with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_required_anti_affinity
            .iter()
            .map(|i| &self.nodes[*i])
    }
}

fn positions(nodes: &[Arc<NodeInfo>], keep: impl Fn(&NodeInfo) -> bool) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| keep(n))
        .map(|(i, _)| i)
        .collect()
}
