//! `NodeInfo`: a node and what its pods take from it, kept incrementally by
//! the cache (each change bumps `generation`, which is how a snapshot knows
//! what to copy).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint};

use super::pod_info::{HostPort, PodInfo};
use super::resource::Resource;
use super::selector::{labels_of, Labels};

#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    pub name: String,
    pub pods: Vec<Arc<PodInfo>>,
    /// The label digest of each of `pods`, in the same order: counting
    /// the pods a selector matches reads these, not the pods.
    pub pod_digests: Vec<u64>,
    /// Pods with any (anti-)affinity term: InterPodAffinity looks only at these.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with required anti-affinity: every candidate pod must respect them.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    pub used_ports: Vec<HostPort>,
    pub requested: Resource,
    pub non_zero_requested: Resource,
    pub allocatable: Resource,
    /// Images on this node: size by normalized name.
    pub images: HashMap<String, i64>,
    pub generation: u64,
}

impl NodeInfo {
    pub fn new(node: Arc<Node>, generation: u64) -> NodeInfo {
        let mut info = NodeInfo {
            name: String::new(),
            node: node.clone(),
            pods: Vec::new(),
            pod_digests: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            used_ports: Vec::new(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable: Resource::default(),
            images: HashMap::new(),
            generation,
        };
        info.set_node(node);
        info
    }

    /// Replaces the Node object, keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable =
            Resource::from_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        self.name = node.metadata.name.clone().unwrap_or_default();
        self.images = node_images(&node);
        self.node = node;
    }

    pub fn labels(&self) -> &Labels {
        labels_of(&self.node.metadata.labels)
    }

    pub fn taints(&self) -> &[Taint] {
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
    }

    pub fn unschedulable(&self) -> bool {
        self.node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    }

    /// How many pods the node takes (`allocatable.pods`).
    pub fn allowed_pod_number(&self) -> i64 {
        self.allocatable.allowed_pods
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.milli_cpu += pod.non_zero_requests.milli_cpu;
        self.non_zero_requested.memory += pod.non_zero_requests.memory;
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.required_anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pod_digests.push(pod.label_digest);
        self.pods.push(pod);
    }

    /// Removes the pod with `key`; returns it if it was here.
    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let index = self.pods.iter().position(|p| p.key == key)?;
        let pod = self.pods.swap_remove(index);
        self.pod_digests.swap_remove(index);
        self.pods_with_affinity.retain(|p| p.key != key);
        self.pods_with_required_anti_affinity
            .retain(|p| p.key != key);
        self.requested.sub(&pod.requests);
        self.non_zero_requested.milli_cpu -= pod.non_zero_requests.milli_cpu;
        self.non_zero_requested.memory -= pod.non_zero_requests.memory;
        for port in &pod.host_ports {
            if let Some(i) = self.used_ports.iter().position(|p| p == port) {
                self.used_ports.swap_remove(i);
            }
        }
        Some(pod)
    }

    /// Whether `port` conflicts with a port a pod here already claims.
    pub fn port_conflicts(&self, port: &HostPort) -> bool {
        self.used_ports.iter().any(|used| used.conflicts(port))
    }
}

/// An image name as the kubelet reports it: a name without tag or digest
/// means `:latest` (kube's `normalizedImageName`).
pub fn normalized_image_name(name: &str) -> String {
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    if name.contains('@') || last_segment.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// The node's images (`status.images`), every name normalized.
fn node_images(node: &Node) -> HashMap<String, i64> {
    let images = node
        .status
        .as_ref()
        .and_then(|s| s.images.as_deref())
        .unwrap_or_default();
    images
        .iter()
        .flat_map(|image| {
            let size = image.size_bytes.unwrap_or(0);
            image
                .names
                .iter()
                .flatten()
                .map(move |name| (normalized_image_name(name), size))
        })
        .collect()
}
