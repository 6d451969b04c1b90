//! Builders of pods and nodes, for the unit tests and the benchmark.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeSpec, NodeStatus, Pod, PodSpec,
    ResourceRequirements, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{NodeInfo, PodInfo};

/// `{cpu, memory}` as a resource list; an empty string leaves that one out.
pub fn resource_list(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    let mut list = BTreeMap::new();
    if !cpu.is_empty() {
        list.insert("cpu".to_string(), Quantity(cpu.to_string()));
    }
    if !memory.is_empty() {
        list.insert("memory".to_string(), Quantity(memory.to_string()));
    }
    list
}

pub fn container(name: &str, cpu: &str, memory: &str) -> Container {
    Container {
        name: name.into(),
        image: Some("registry.k8s.io/pause:3.10".into()),
        resources: Some(ResourceRequirements {
            requests: Some(resource_list(cpu, memory)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn pod_with(name: &str, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            ..Default::default()
        }),
        status: None,
    }
}

/// A pod under construction.
#[derive(Clone)]
pub struct PodBuilder(Pod);

impl PodBuilder {
    pub fn new(name: &str) -> PodBuilder {
        PodBuilder(pod_with(name, vec![container("c", "", "")]))
    }

    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.metadata.namespace = Some(namespace.into());
        self
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.into());
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Requests of the (single) container; "" leaves a dimension unset.
    pub fn req(mut self, cpu: &str, memory: &str) -> Self {
        self.spec().containers = vec![container("c", cpu, memory)];
        self
    }

    pub fn extended(mut self, name: &str, amount: &str) -> Self {
        let requests = self.spec().containers[0]
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(Default::default);
        requests.insert(name.into(), Quantity(amount.into()));
        self
    }

    pub fn image(mut self, image: &str) -> Self {
        self.spec().containers[0].image = Some(image.into());
        self
    }

    pub fn container(mut self, container: Container) -> Self {
        self.spec().containers.push(container);
        self
    }

    pub fn host_port(mut self, port: i32, protocol: &str, ip: &str) -> Self {
        let ports = self.spec().containers[0].ports.get_or_insert_with(Vec::new);
        ports.push(ContainerPort {
            container_port: port,
            host_port: Some(port),
            protocol: Some(protocol.into()),
            host_ip: (!ip.is_empty()).then(|| ip.to_string()),
            ..Default::default()
        });
        self
    }

    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }

    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.spec().priority = Some(priority);
        self
    }

    pub fn toleration(mut self, toleration: Toleration) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(toleration);
        self
    }

    pub fn affinity(mut self, affinity: Affinity) -> Self {
        self.spec().affinity = Some(affinity);
        self
    }

    pub fn spread(mut self, constraint: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(constraint);
        self
    }

    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.into());
        self
    }

    pub fn gate(mut self, name: &str) -> Self {
        let gate = k8s_openapi::api::core::v1::PodSchedulingGate { name: name.into() };
        self.spec()
            .scheduling_gates
            .get_or_insert_with(Vec::new)
            .push(gate);
        self
    }

    pub fn build(self) -> Pod {
        self.0
    }

    pub fn info(self) -> Arc<PodInfo> {
        PodInfo::new(Arc::new(self.0))
    }
}

/// A node under construction: 32 cpus, 256Gi and 110 pods unless told.
#[derive(Clone)]
pub struct NodeBuilder(Node);

impl NodeBuilder {
    pub fn new(name: &str) -> NodeBuilder {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_string(),
                    name.to_string(),
                )])),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus::default()),
        };
        NodeBuilder(node).capacity("32", "256Gi", 110)
    }

    pub fn capacity(mut self, cpu: &str, memory: &str, pods: i64) -> Self {
        let mut list = resource_list(cpu, memory);
        list.insert("pods".into(), Quantity(pods.to_string()));
        let status = self.0.status.get_or_insert_with(Default::default);
        status.capacity = Some(list.clone());
        status.allocatable = Some(list);
        self
    }

    pub fn allocatable(mut self, name: &str, amount: &str) -> Self {
        let status = self.0.status.get_or_insert_with(Default::default);
        status
            .allocatable
            .get_or_insert_with(Default::default)
            .insert(name.into(), Quantity(amount.into()));
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    pub fn unschedulable(mut self) -> Self {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }

    pub fn image(mut self, name: &str, size: i64) -> Self {
        let status = self.0.status.get_or_insert_with(Default::default);
        status
            .images
            .get_or_insert_with(Vec::new)
            .push(ContainerImage {
                names: Some(vec![name.into()]),
                size_bytes: Some(size),
            });
        self
    }

    pub fn build(self) -> Node {
        self.0
    }

    /// A `NodeInfo` holding `pods`.
    pub fn info_with(self, pods: &[Arc<PodInfo>]) -> NodeInfo {
        let mut info = NodeInfo::new(Arc::new(self.0), 1);
        for pod in pods {
            info.add_pod(pod.clone());
        }
        info
    }
}

pub fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Toleration {
        key: some(key),
        operator: some(operator),
        value: some(value),
        effect: some(effect),
        toleration_seconds: None,
    }
}
