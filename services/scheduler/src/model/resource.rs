//! Resource vectors: what a pod requests and what a node offers, as integers
//! (millicores, bytes, counts), and kube's rules for a pod's effective request.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{parse_milli_value, parse_value};

/// CPU counted for a container that requests none, when scoring (kube's
/// `DefaultMilliCPURequest`), so that many request-less pods do not pile up on
/// one node.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory counted for a container that requests none, when scoring.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A resource vector. Extended resources, hugepages and other scalar
/// resources live in `scalar`, which stays empty (no allocation) for most pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pods: i64,
    pub scalar: BTreeMap<String, i64>,
}

impl Resource {
    /// Reads a resource list (`requests`, `allocatable`, `overhead`). Names
    /// the scheduler does not account for are ignored, as kube ignores them.
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Resource {
        let mut resource = Resource::default();
        if let Some(list) = list {
            for (name, quantity) in list {
                resource.add_named(name, &quantity.0);
            }
        }
        resource
    }

    fn add_named(&mut self, name: &str, quantity: &str) {
        match name {
            CPU => self.milli_cpu += parse_milli_value(quantity).unwrap_or(0),
            MEMORY => self.memory += parse_value(quantity).unwrap_or(0),
            EPHEMERAL_STORAGE => self.ephemeral_storage += parse_value(quantity).unwrap_or(0),
            PODS => self.allowed_pods += parse_value(quantity).unwrap_or(0),
            _ if is_scalar_resource_name(name) => {
                *self.scalar.entry(name.to_string()).or_default() +=
                    parse_value(quantity).unwrap_or(0)
            }
            _ => {}
        }
    }

    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pods += other.allowed_pods;
        for (name, value) in &other.scalar {
            *self.scalar.entry(name.clone()).or_default() += value;
        }
    }

    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pods -= other.allowed_pods;
        for (name, value) in &other.scalar {
            *self.scalar.entry(name.clone()).or_default() -= value;
        }
    }

    /// Each dimension becomes the larger of the two.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pods = self.allowed_pods.max(other.allowed_pods);
        for (name, value) in &other.scalar {
            let entry = self.scalar.entry(name.clone()).or_default();
            *entry = (*entry).max(*value);
        }
    }

    /// The amount of one named resource.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pods,
            _ => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// Extended resources (`example.com/gpu`), prefixed native ones
/// (`kubernetes.io/...`), hugepages and attachable volumes: the resources kube
/// keeps beside cpu, memory and ephemeral storage.
pub fn is_scalar_resource_name(name: &str) -> bool {
    name.contains('/') && !name.starts_with("requests.")
        || name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
}

/// Extended resources proper: those a device plugin or an operator advertises.
pub fn is_extended_resource_name(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Whether a missing request should count as kube's default (scoring) or as zero (fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingRequests {
    AsZero,
    AsDefault,
}

fn container_requests(container: &Container, missing: MissingRequests) -> Resource {
    let requests = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let mut resource = Resource::from_list(requests);
    if missing == MissingRequests::AsDefault {
        let has = |name: &str| requests.is_some_and(|r| r.contains_key(name));
        if !has(CPU) {
            resource.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !has(MEMORY) {
            resource.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    resource
}

fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// A pod's effective request, as kube computes it: the sum of its containers
/// (running together), at least the largest init container (they run one at a
/// time, each beside the sidecars started before it), sidecars counted with
/// the containers, plus the pod's overhead.
pub fn pod_requests(pod: &Pod, missing: MissingRequests) -> Resource {
    let Some(spec) = pod.spec.as_ref() else {
        return Resource::default();
    };
    let mut total = Resource::default();
    for container in &spec.containers {
        total.add(&container_requests(container, missing));
    }
    let mut sidecars = Resource::default();
    let mut largest_init = Resource::default();
    for container in spec.init_containers.iter().flatten() {
        let requests = container_requests(container, missing);
        if is_sidecar(container) {
            total.add(&requests);
            sidecars.add(&requests);
            largest_init.set_max(&sidecars);
        } else {
            let mut with_sidecars = requests;
            with_sidecars.add(&sidecars);
            largest_init.set_max(&with_sidecars);
        }
    }
    total.set_max(&largest_init);
    total.add(&Resource::from_list(spec.overhead.as_ref()));
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{container, pod_with};

    #[test]
    fn pod_requests_follow_kube_rules() {
        struct Case {
            name: &'static str,
            containers: Vec<Container>,
            init: Vec<Container>,
            overhead: Option<(&'static str, &'static str)>,
            want_cpu: i64,
            want_memory: i64,
        }
        let mut sidecar = container("s", "500m", "1Gi");
        sidecar.restart_policy = Some("Always".into());
        let cases = vec![
            Case {
                name: "containers add up",
                containers: vec![container("a", "1", "1Gi"), container("b", "500m", "1Gi")],
                init: vec![],
                overhead: None,
                want_cpu: 1500,
                want_memory: 2 << 30,
            },
            Case {
                name: "largest init container wins per dimension",
                containers: vec![container("a", "2", "1G"), container("b", "1", "1G")],
                init: vec![container("i1", "2", "1G"), container("i2", "2", "3G")],
                overhead: None,
                want_cpu: 3000,
                want_memory: 3_000_000_000,
            },
            Case {
                name: "overhead is added",
                containers: vec![container("a", "1", "1Gi")],
                init: vec![],
                overhead: Some(("250m", "120Mi")),
                want_cpu: 1250,
                want_memory: (1 << 30) + 120 * (1 << 20),
            },
            Case {
                name: "sidecars run beside later init containers and the containers",
                containers: vec![container("a", "1", "1Gi")],
                init: vec![sidecar.clone(), container("i", "2", "1Gi")],
                overhead: None,
                want_cpu: 2500,
                want_memory: 2 << 30,
            },
        ];
        for case in cases {
            let mut pod = pod_with("p", case.containers);
            let spec = pod.spec.as_mut().unwrap();
            spec.init_containers = Some(case.init);
            if let Some((cpu, memory)) = case.overhead {
                spec.overhead = Some(crate::model::testing::resource_list(cpu, memory));
            }
            let got = pod_requests(&pod, MissingRequests::AsZero);
            assert_eq!(got.milli_cpu, case.want_cpu, "{}", case.name);
            assert_eq!(got.memory, case.want_memory, "{}", case.name);
        }
    }

    #[test]
    fn missing_requests_count_as_defaults_only_when_asked() {
        let mut bare = container("a", "0", "0");
        bare.resources = None;
        let pod = pod_with("p", vec![bare]);
        assert!(pod_requests(&pod, MissingRequests::AsZero).is_zero());
        let scored = pod_requests(&pod, MissingRequests::AsDefault);
        assert_eq!(scored.milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(scored.memory, DEFAULT_MEMORY_REQUEST);
        let explicit_zero = pod_with("p", vec![container("a", "0", "0")]);
        assert!(pod_requests(&explicit_zero, MissingRequests::AsDefault).is_zero());
    }

    #[test]
    fn extended_resources_are_scalar() {
        assert!(is_scalar_resource_name("example.com/gpu"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(!is_scalar_resource_name("storage"));
        assert!(is_extended_resource_name("example.com/gpu"));
        assert!(!is_extended_resource_name("kubernetes.io/batch"));
    }
}
