//! `PodInfo`: a pod with what every scheduling cycle needs computed once
//! (requests, affinity terms compiled, host ports), shared by `Arc` between
//! the queue, the cache and the snapshots so nothing clones a pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Pod, PodAffinityTerm, PodSpec, Toleration, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::resource::{pod_requests, MissingRequests, Resource};
use super::selector::{labels_of, LabelMatcher, Labels};

/// One (anti-)affinity term of a pod, compiled.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    pub namespaces: Vec<String>,
    pub namespace_selector: LabelMatcher,
    pub selector: LabelMatcher,
    pub topology_key: String,
}

impl AffinityTerm {
    /// Compiles `term` of `owner`: with neither namespaces nor a namespace
    /// selector the term is about the owner's namespace; `matchLabelKeys` and
    /// `mismatchLabelKeys` become requirements on the owner's label values.
    pub fn new(owner: &Pod, term: &PodAffinityTerm) -> AffinityTerm {
        let owner_namespace = owner.metadata.namespace.clone().unwrap_or_default();
        let mut namespaces = term.namespaces.clone().unwrap_or_default();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.push(owner_namespace);
        }
        AffinityTerm {
            namespaces,
            namespace_selector: LabelMatcher::new(term.namespace_selector.as_ref()),
            selector: LabelMatcher::new(with_label_keys(owner, term).as_ref()),
            topology_key: term.topology_key.clone(),
        }
    }

    /// Whether matching needs the labels of the other pod's namespace.
    pub fn uses_namespace_selector(&self) -> bool {
        !self.namespace_selector.is_nothing()
    }

    /// Whether `pod`, in a namespace labelled `namespace_labels`, is selected.
    pub fn matches(&self, pod: &Pod, namespace_labels: &Labels) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let in_namespace = self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.matches(namespace_labels);
        in_namespace && self.selector.matches(labels_of(&pod.metadata.labels))
    }
}

fn with_label_keys(owner: &Pod, term: &PodAffinityTerm) -> Option<LabelSelector> {
    let mut selector = term.label_selector.clone()?;
    let labels = labels_of(&owner.metadata.labels);
    let mut extra = Vec::new();
    for (keys, operator) in [
        (&term.match_label_keys, "In"),
        (&term.mismatch_label_keys, "NotIn"),
    ] {
        for key in keys.iter().flatten() {
            if let Some(value) = labels.get(key) {
                extra.push(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: operator.into(),
                    values: Some(vec![value.clone()]),
                });
            }
        }
    }
    if !extra.is_empty() {
        selector
            .match_expressions
            .get_or_insert_with(Vec::new)
            .extend(extra);
    }
    Some(selector)
}

/// A preferred term and its weight.
#[derive(Debug, Clone)]
pub struct WeightedTerm {
    pub term: AffinityTerm,
    pub weight: i32,
}

/// A host port a pod's container claims.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// kube's rule: two claims conflict on the same port and protocol when
    /// either address is the wildcard or the addresses are equal.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// A pod and what scheduling reads from it, computed once.
#[derive(Debug)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    /// The pod's uid (or namespace/name when it has none, as in some tests).
    pub key: String,
    pub priority: i32,
    /// Requests as the fit filter counts them (missing ones are zero).
    pub requests: Resource,
    /// Requests as scoring counts them (missing cpu/memory count as kube's defaults).
    pub non_zero_requests: Resource,
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<WeightedTerm>,
    pub preferred_anti_affinity: Vec<WeightedTerm>,
    pub host_ports: Vec<HostPort>,
    /// Its labels summed up (see [`super::label_digest`]).
    pub label_digest: u64,
}

static EMPTY_SPEC: std::sync::LazyLock<PodSpec> = std::sync::LazyLock::new(PodSpec::default);

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> Arc<PodInfo> {
        let key = pod_key(&pod);
        let spec = pod.spec.as_ref();
        let affinity = spec.and_then(|s| s.affinity.as_ref());
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let pod_anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let required = |terms: Option<&Vec<PodAffinityTerm>>| {
            terms
                .into_iter()
                .flatten()
                .map(|t| AffinityTerm::new(&pod, t))
                .collect::<Vec<_>>()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| {
            terms
                .into_iter()
                .flatten()
                .map(|t| WeightedTerm {
                    term: AffinityTerm::new(&pod, &t.pod_affinity_term),
                    weight: t.weight,
                })
                .collect::<Vec<_>>()
        };
        Arc::new(PodInfo {
            key,
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            requests: pod_requests(&pod, MissingRequests::AsZero),
            non_zero_requests: pod_requests(&pod, MissingRequests::AsDefault),
            required_affinity: required(pod_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti_affinity: required(pod_anti_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_affinity: preferred(pod_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti_affinity: preferred(pod_anti_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            host_ports: host_ports(spec),
            label_digest: super::label_digest::of_labels(labels_of(&pod.metadata.labels)),
            pod,
        })
    }

    pub fn spec(&self) -> &PodSpec {
        self.pod.spec.as_ref().unwrap_or(&EMPTY_SPEC)
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn labels(&self) -> &Labels {
        labels_of(&self.pod.metadata.labels)
    }

    pub fn node_name(&self) -> Option<&str> {
        self.spec().node_name.as_deref().filter(|n| !n.is_empty())
    }

    pub fn tolerations(&self) -> &[Toleration] {
        self.spec().tolerations.as_deref().unwrap_or_default()
    }

    pub fn has_affinity(&self) -> bool {
        !self.required_affinity.is_empty()
            || !self.required_anti_affinity.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
    }

    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }

    /// `namespace/name`, for messages and logs.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }
}

/// The key the cache and the queue know a pod by.
pub fn pod_key(pod: &Pod) -> String {
    match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

fn host_ports(spec: Option<&PodSpec>) -> Vec<HostPort> {
    let Some(spec) = spec else { return Vec::new() };
    // Sidecars (restartable init containers) keep their ports while the pod runs.
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let containers = spec.containers.iter().chain(sidecars);
    containers
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| HostPort {
            ip: p
                .host_ip
                .clone()
                .filter(|ip| !ip.is_empty())
                .unwrap_or_else(|| "0.0.0.0".into()),
            protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: p.host_port.unwrap_or(0),
        })
        .collect()
}
