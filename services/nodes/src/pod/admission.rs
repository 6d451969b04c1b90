//! The kubelet's admission of a pod bound to its node: the general
//! predicates it runs again after the scheduler (resources, node affinity,
//! host ports, NoExecute taints), because a pod created with
//! `spec.nodeName` set never met a scheduler and a scheduler's cache may
//! lag. A refused pod fails at once with the kubelet's reason
//! (`OutOfcpu`, `OutOfmemory`, `OutOfpods`, `NodeAffinity`, ...).

use std::collections::{BTreeMap, BTreeSet};

use capstan_component_helpers::node_affinity;
use capstan_component_helpers::tolerations::tolerates;
use k8s_openapi::api::core::v1::{Pod, PodSpec, Taint};

use crate::quantity::Amounts;

/// Why the kubelet refused a pod: the pod's status reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

impl Rejection {
    fn predicate(name: &str, description: &str) -> Rejection {
        Rejection {
            reason: name.to_string(),
            message: format!("Predicate {name} failed: {description}"),
        }
    }
}

/// What a node has given to the pods it admitted and still runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub requests: Amounts,
    pub pods: i64,
    /// (protocol, port) of every host port in use.
    pub host_ports: BTreeSet<(String, i32)>,
}

impl Usage {
    /// Counts an admitted pod.
    pub fn add(&mut self, requests: &Amounts, ports: &[(String, i32)]) {
        for (name, v) in requests {
            *self.requests.entry(name.clone()).or_default() += v;
        }
        self.pods += 1;
        self.host_ports.extend(ports.iter().cloned());
    }

    /// Forgets a pod that finished or left.
    pub fn remove(&mut self, requests: &Amounts, ports: &[(String, i32)]) {
        for (name, v) in requests {
            *self.requests.entry(name.clone()).or_default() -= v;
        }
        self.pods -= 1;
        for port in ports {
            self.host_ports.remove(port);
        }
    }
}

/// The (protocol, port) of every host port the pod's containers ask for.
pub fn host_ports(spec: &PodSpec) -> Vec<(String, i32)> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            Some((p.protocol.clone().unwrap_or_else(|| "TCP".into()), port))
        })
        .collect()
}

/// The node's side of admission.
pub struct NodeFacts<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [Taint],
    pub allocatable: &'a Amounts,
}

/// Admits `pod` (whose effective requests are `requests`) on `node`, which
/// already gives `used` to others; checked in the kubelet's order.
pub fn admit(
    pod: &Pod,
    requests: &Amounts,
    node: &NodeFacts,
    used: &Usage,
) -> Result<(), Rejection> {
    let spec = pod.spec.as_ref().ok_or_else(|| Rejection {
        reason: "UnexpectedAdmissionError".into(),
        message: "the pod has no spec".into(),
    })?;
    fits(requests, node.allocatable, used)?;
    if !node_affinity::matches(spec, node.name, node.labels) {
        return Err(Rejection::predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    if host_ports(spec).iter().any(|p| used.host_ports.contains(p)) {
        return Err(Rejection::predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let untolerated = node
        .taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)));
    if let Some(taint) = untolerated {
        return Err(Rejection::predicate(
            "TaintToleration",
            &format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// Pods first, then cpu, memory, ephemeral-storage, then every other resource.
fn fits(requests: &Amounts, allocatable: &Amounts, used: &Usage) -> Result<(), Rejection> {
    let mut order: Vec<(&str, i64)> = vec![("pods", 1)];
    for name in ["cpu", "memory", "ephemeral-storage"] {
        order.push((name, requests.get(name).copied().unwrap_or(0)));
    }
    for (name, v) in requests {
        if !matches!(
            name.as_str(),
            "pods" | "cpu" | "memory" | "ephemeral-storage"
        ) {
            order.push((name, *v));
        }
    }
    for (name, wanted) in order {
        if wanted == 0 {
            continue;
        }
        let in_use = match name {
            "pods" => used.pods,
            _ => used.requests.get(name).copied().unwrap_or(0),
        };
        let capacity = allocatable.get(name).copied().unwrap_or(0);
        if in_use + wanted > capacity {
            return Err(Rejection {
                reason: format!("OutOf{name}"),
                message: format!(
                    "Node didn't have enough resource: {name}, requested: {wanted}, used: {in_use}, capacity: {capacity}"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn allocatable() -> Amounts {
        Amounts::from([
            ("cpu".into(), 2000),
            ("memory".into(), 4 << 30),
            ("pods".into(), 2),
        ])
    }

    fn facts<'a>(
        labels: &'a BTreeMap<String, String>,
        taints: &'a [Taint],
        alloc: &'a Amounts,
    ) -> NodeFacts<'a> {
        NodeFacts {
            name: "n1",
            labels,
            taints,
            allocatable: alloc,
        }
    }

    #[test]
    fn a_pod_that_does_not_fit_is_refused_with_the_kubelets_reason() {
        let alloc = allocatable();
        let labels = BTreeMap::new();
        let node = facts(&labels, &[], &alloc);
        let p = pod(json!({"containers": [{"name": "a", "image": "x"}]}));
        let mut used = Usage::default();
        used.requests.insert("cpu".into(), 1500);
        let requests = Amounts::from([("cpu".into(), 1000)]);
        let refused = admit(&p, &requests, &node, &used).unwrap_err();
        assert_eq!(refused.reason, "OutOfcpu");
        assert_eq!(
            refused.message,
            "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"
        );
        used.pods = 2;
        assert_eq!(
            admit(&p, &Amounts::new(), &node, &used).unwrap_err().reason,
            "OutOfpods"
        );
        let gpu = Amounts::from([("example.com/gpu".into(), 1)]);
        let refused = admit(&p, &gpu, &node, &Usage::default()).unwrap_err();
        assert_eq!(refused.reason, "OutOfexample.com/gpu");
        assert!(admit(&p, &requests, &node, &Usage::default()).is_ok());
    }

    #[test]
    fn node_selectors_and_required_affinity_are_checked() {
        let alloc = allocatable();
        let labels = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        let node = facts(&labels, &[], &alloc);
        let selector = |zone: &str| pod(json!({"containers": [], "nodeSelector": {"zone": zone}}));
        assert!(admit(&selector("a"), &Amounts::new(), &node, &Usage::default()).is_ok());
        let refused = admit(&selector("b"), &Amounts::new(), &node, &Usage::default()).unwrap_err();
        assert_eq!(refused.reason, "NodeAffinity");
        let affinity = |op: &str, values: serde_json::Value| {
            pod(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": op, "values": values}]},
            ]}}}}))
        };
        assert!(admit(
            &affinity("In", json!(["a", "b"])),
            &Amounts::new(),
            &node,
            &Usage::default()
        )
        .is_ok());
        assert!(admit(
            &affinity("NotIn", json!(["a"])),
            &Amounts::new(),
            &node,
            &Usage::default()
        )
        .is_err());
        assert!(admit(
            &affinity("Exists", json!([])),
            &Amounts::new(),
            &node,
            &Usage::default()
        )
        .is_ok());
        let by_name = pod(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}));
        assert!(admit(&by_name, &Amounts::new(), &node, &Usage::default()).is_ok());
    }

    #[test]
    fn host_ports_and_no_execute_taints_are_checked() {
        let alloc = allocatable();
        let labels = BTreeMap::new();
        let taint: Taint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoExecute"}))
                .unwrap();
        let taints = [taint];
        let node = facts(&labels, &taints, &alloc);
        let plain = pod(json!({"containers": []}));
        assert_eq!(
            admit(&plain, &Amounts::new(), &node, &Usage::default())
                .unwrap_err()
                .reason,
            "TaintToleration"
        );
        let tolerant = pod(
            json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]}),
        );
        assert!(admit(&tolerant, &Amounts::new(), &node, &Usage::default()).is_ok());
        let mut used = Usage::default();
        let ports = host_ports(tolerant.spec.as_ref().unwrap());
        used.add(&Amounts::new(), &ports);
        assert_eq!(
            admit(&tolerant, &Amounts::new(), &node, &used)
                .unwrap_err()
                .reason,
            "NodePorts"
        );
        used.remove(&Amounts::new(), &ports);
        assert_eq!(
            used,
            Usage {
                requests: Amounts::new(),
                ..Usage::default()
            }
        );
    }
}
