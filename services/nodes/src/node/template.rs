//! What every node of a process looks like, and the Node object a kubelet
//! would register for node number `i`: labels (hostname, os, arch, zone),
//! taints, capacity and allocatable (capacity less the kubelet's default
//! hard eviction thresholds), addresses, daemon endpoint, node info.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
    Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::conditions::conditions;
use crate::quantity::{self, Amounts};

/// The label every simulated node carries, so that any process (and any
/// user) can tell them apart from real kubelets' nodes.
pub const SIMULATED_LABEL: &str = "nodes.capstan.dev/simulated";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The version a node reports, the API server's own.
pub const KUBELET_VERSION: &str = "v1.32.0-capstan";

/// The kubelet's default `--eviction-hard` reserves: memory.available<100Mi,
/// nodefs.available<10%.
const EVICTION_MEMORY: i64 = 100 << 20;
const EVICTION_NODEFS_PERCENT: i64 = 10;

/// The shape shared by the nodes of one process.
#[derive(Debug, Clone)]
pub struct NodeTemplate {
    pub name_prefix: String,
    /// cpu (millicores), memory, pods, ephemeral-storage, extended resources.
    pub capacity: Amounts,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub zones: Vec<String>,
    /// The address every node reports (the process's own).
    pub address: String,
    /// The port of the kubelet API (the process's one listener).
    pub kubelet_port: u16,
}

impl NodeTemplate {
    pub fn name(&self, index: usize) -> String {
        format!("{}{index}", self.name_prefix)
    }

    /// Capacity less what the kubelet keeps back for eviction.
    pub fn allocatable(&self) -> Amounts {
        let mut allocatable = self.capacity.clone();
        if let Some(memory) = allocatable.get_mut("memory") {
            *memory = (*memory - EVICTION_MEMORY).max(0);
        }
        if let Some(storage) = allocatable.get_mut("ephemeral-storage") {
            *storage -= *storage * EVICTION_NODEFS_PERCENT / 100;
        }
        allocatable
    }

    /// The node's labels: the kubelet's own, its zone, then the user's.
    pub fn labels(&self, index: usize) -> BTreeMap<String, String> {
        let name = self.name(index);
        let mut labels = BTreeMap::from([
            ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            (HOSTNAME_LABEL.to_string(), name),
            (SIMULATED_LABEL.to_string(), "true".to_string()),
        ]);
        if !self.zones.is_empty() {
            let zone = &self.zones[index % self.zones.len()];
            labels.insert(ZONE_LABEL.to_string(), zone.clone());
        }
        labels.extend(self.labels.clone());
        labels
    }

    /// The Node object to register for node `index` with `pod_cidr`.
    pub fn node(&self, index: usize, pod_cidr: &str, now: DateTime<Utc>) -> Node {
        let name = self.name(index);
        Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(self.labels(index)),
                annotations: Some(BTreeMap::from([
                    ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
                    (
                        "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
                        "true".to_string(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: Some(pod_cidr.to_string()),
                pod_cidrs: Some(vec![pod_cidr.to_string()]),
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                ..NodeSpec::default()
            }),
            status: Some(self.status(&name, &[], now, &[])),
        }
    }

    /// The full status a kubelet reports: `previous` conditions keep their
    /// transition times; `images` are those pulled so far.
    pub fn status(
        &self,
        name: &str,
        previous: &[k8s_openapi::api::core::v1::NodeCondition],
        now: DateTime<Utc>,
        images: &[k8s_openapi::api::core::v1::ContainerImage],
    ) -> NodeStatus {
        NodeStatus {
            capacity: Some(quantity::quantities(&self.capacity)),
            allocatable: Some(quantity::quantities(&self.allocatable())),
            conditions: Some(conditions(previous, now)),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: self.address.clone(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.to_string(),
                },
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints {
                kubelet_endpoint: Some(DaemonEndpoint {
                    port: i32::from(self.kubelet_port),
                }),
            }),
            node_info: Some(node_info(name)),
            images: (!images.is_empty()).then(|| images.to_vec()),
            ..NodeStatus::default()
        }
    }
}

/// Stable identifiers per node name, shaped as a machine's.
fn node_info(name: &str) -> NodeSystemInfo {
    let digest = |salt: &str| -> String {
        let bytes = Sha256::digest(format!("{salt}/{name}").as_bytes());
        bytes[..16].iter().map(|b| format!("{b:02x}")).collect()
    };
    let uuid = |hex: String| {
        format!(
            "{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    };
    NodeSystemInfo {
        architecture: "amd64".into(),
        boot_id: uuid(digest("boot")),
        container_runtime_version: "containerd://1.7.24-capstan".into(),
        kernel_version: "6.1.0-capstan".into(),
        kube_proxy_version: String::new(),
        kubelet_version: KUBELET_VERSION.into(),
        machine_id: digest("machine"),
        operating_system: "linux".into(),
        os_image: "Capstan simulated node".into(),
        system_uuid: uuid(digest("system")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template() -> NodeTemplate {
        NodeTemplate {
            name_prefix: "node-".into(),
            capacity: Amounts::from([
                ("cpu".into(), 32_000),
                ("memory".into(), 256 << 30),
                ("pods".into(), 110),
                ("ephemeral-storage".into(), 100 << 30),
            ]),
            labels: BTreeMap::from([("tier".into(), "sim".into())]),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("sim".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }],
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            address: "127.0.0.1".into(),
            kubelet_port: 10250,
        }
    }

    #[test]
    fn a_registered_node_looks_like_a_kubelets() {
        let now = DateTime::parse_from_rfc3339("2025-03-01T10:00:00Z")
            .unwrap()
            .to_utc();
        let node = serde_json::to_value(template().node(4, "10.244.4.0/24", now)).unwrap();
        assert_eq!(node["metadata"]["name"], "node-4");
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], "node-4");
        assert_eq!(labels["topology.kubernetes.io/zone"], "zone-b");
        assert_eq!(labels["tier"], "sim");
        assert_eq!(labels[SIMULATED_LABEL], "true");
        assert_eq!(node["spec"]["podCIDR"], "10.244.4.0/24");
        assert_eq!(node["spec"]["taints"][0]["effect"], "NoSchedule");
        let status = &node["status"];
        assert_eq!(
            status["capacity"],
            json!({"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "100Gi"})
        );
        assert_eq!(status["allocatable"]["memory"], "262044Mi");
        assert_eq!(status["allocatable"]["ephemeral-storage"], "90Gi");
        assert_eq!(status["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
        assert_eq!(
            status["addresses"][0],
            json!({"type": "InternalIP", "address": "127.0.0.1"})
        );
        assert_eq!(status["nodeInfo"]["kubeletVersion"], KUBELET_VERSION);
        assert_eq!(status["nodeInfo"]["systemUUID"].as_str().unwrap().len(), 36);
        let ready = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["reason"], "KubeletReady");
    }
}
