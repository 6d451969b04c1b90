//! What the resource scores share: for each configured resource, what the
//! node would have requested with the pod on it, and what it can give.

use serde::Deserialize;

use crate::framework::{ActionType, ArgsError, ClusterEvent, EventResource};
use crate::model::resource::{is_scalar_resource_name, CPU, EPHEMERAL_STORAGE, MEMORY};
use crate::model::{NodeInfo, PodInfo};

/// A resource and its weight in a score.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default)]
    pub weight: i64,
}

/// kube's default: cpu and memory, weight 1 each.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![
        ResourceSpec {
            name: CPU.into(),
            weight: 1,
        },
        ResourceSpec {
            name: MEMORY.into(),
            weight: 1,
        },
    ]
}

/// Defaults an empty list and zero weights; refuses weights outside 1..=100.
pub fn checked_resources(
    resources: Option<Vec<ResourceSpec>>,
    field: &str,
) -> Result<Vec<ResourceSpec>, ArgsError> {
    let mut resources = resources
        .filter(|r| !r.is_empty())
        .unwrap_or_else(default_resources);
    for (i, spec) in resources.iter_mut().enumerate() {
        if spec.weight == 0 {
            spec.weight = 1;
        }
        if !(1..=100).contains(&spec.weight) {
            return Err(ArgsError::new(
                format!("{field}[{i}].weight"),
                format!(
                    "Invalid value: {}: resource weight of {} not in valid range [1, 100]",
                    spec.weight, spec.name
                ),
            ));
        }
    }
    Ok(resources)
}

/// Whether a score counts missing cpu/memory requests as kube's defaults
/// (NodeResourcesFit) or as they are (BalancedAllocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    NonZero,
    Requested,
}

/// The pod's request of each resource in `specs`.
pub fn pod_requests(pod: &PodInfo, specs: &[ResourceSpec], counting: Counting) -> Vec<i64> {
    let source = match counting {
        Counting::NonZero => &pod.non_zero_requests,
        Counting::Requested => &pod.requests,
    };
    specs
        .iter()
        .map(|spec| match spec.name.as_str() {
            CPU | MEMORY => source.get(&spec.name),
            _ => pod.requests.get(&spec.name),
        })
        .collect()
}

/// Per resource: (requested with the pod, allocatable). A scalar resource the
/// pod does not ask for, or the node does not have, is (0, 0): not scored.
pub fn requested_and_allocatable(
    node: &NodeInfo,
    specs: &[ResourceSpec],
    pod_requests: &[i64],
    counting: Counting,
) -> (Vec<i64>, Vec<i64>) {
    let node_requested = match counting {
        Counting::NonZero => &node.non_zero_requested,
        Counting::Requested => &node.requested,
    };
    let mut requested = vec![0; specs.len()];
    let mut allocatable = vec![0; specs.len()];
    for (i, spec) in specs.iter().enumerate() {
        let pod_request = pod_requests[i];
        let (alloc, req) = match spec.name.as_str() {
            CPU | MEMORY => (
                node.allocatable.get(&spec.name),
                node_requested.get(&spec.name) + pod_request,
            ),
            EPHEMERAL_STORAGE => (
                node.allocatable.ephemeral_storage,
                node.requested.ephemeral_storage + pod_request,
            ),
            name if is_scalar_resource_name(name) && pod_request == 0 => (0, 0),
            name => match node.allocatable.scalar.get(name) {
                Some(alloc) => (*alloc, node.requested.get(name) + pod_request),
                None => (0, 0),
            },
        };
        if alloc != 0 {
            allocatable[i] = alloc;
            requested[i] = req;
        }
    }
    (requested, allocatable)
}

/// What may make room: a pod leaving or shrinking, a node added or grown.
pub fn resource_events() -> Vec<ClusterEvent> {
    vec![
        ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::DELETE.or(ActionType::UPDATE_POD_SCALE_DOWN),
        ),
        ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD.or(ActionType::UPDATE_NODE_ALLOCATABLE),
        ),
    ]
}
