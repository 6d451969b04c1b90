//! The objects of kube's scheduler_perf: its default node (4 CPUs, 32Gi,
//! 110 pods, Ready) in three zones, and its pods (100m CPU, 500Mi), plain,
//! spread over the zones, or with required affinity to each other by zone.

use bytes::Bytes;
use serde_json::{json, Value};

pub const NAMESPACE: &str = "sched-perf";
const ZONE: &str = "topology.kubernetes.io/zone";

/// What the measured pods ask of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// scheduler_perf's SchedulingBasic.
    Basic,
    /// TopologySpreading: maxSkew 5 over the zones, DoNotSchedule.
    Spread,
    /// SchedulingPodAffinity: required affinity to the same pods by zone.
    Affinity,
}

impl Case {
    pub fn parse(name: &str) -> Result<Case, String> {
        match name {
            "basic" | "SchedulingBasic" => Ok(Case::Basic),
            "spread" | "TopologySpreading" => Ok(Case::Spread),
            "affinity" | "InterPodAffinity" => Ok(Case::Affinity),
            other => Err(format!(
                "unknown scheduler case `{other}` (use basic, spread, affinity)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Case::Basic => "SchedulingBasic",
            Case::Spread => "TopologySpreading",
            Case::Affinity => "InterPodAffinity",
        }
    }

    /// The targets on a 2-core machine.
    pub fn target_pods_per_second(self) -> f64 {
        match self {
            Case::Basic => 1000.0,
            Case::Spread => 500.0,
            Case::Affinity => 100.0,
        }
    }
}

pub fn namespace() -> Bytes {
    Bytes::from(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            .to_string(),
    )
}

/// The namespace's `default` ServiceAccount, which pods use.
pub fn default_account() -> Bytes {
    Bytes::from(
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": NAMESPACE}})
        .to_string(),
    )
}

/// Node `i`, created with its status (capacity, allocatable, Ready) as a
/// kubelet registers.
pub fn node(i: usize) -> Bytes {
    let name = format!("perf-node-{i}");
    let resources = json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            ZONE: format!("zone-{}", i % 3),
        }},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    });
    Bytes::from(node.to_string())
}

/// Measured pod `i` of `case`.
pub fn pod(case: Case, i: usize) -> Bytes {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": NAMESPACE, "labels": {}},
        "spec": {"containers": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
        }]},
    });
    match case {
        Case::Basic => {}
        Case::Spread => {
            pod["metadata"]["labels"]["foo"] = json!("bar");
            pod["spec"]["topologySpreadConstraints"] = json!([{
                "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"foo": "bar"}},
            }]);
        }
        Case::Affinity => {
            pod["metadata"]["labels"]["foo"] = json!("");
            pod["spec"]["affinity"] = json!({"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"foo": ""}},
                    "topologyKey": ZONE,
                    "namespaces": [NAMESPACE],
                }],
            }});
        }
    }
    Bytes::from(pod.to_string())
}

/// Whether a created node's answer kept its status (a kubelet's
/// registration does).
pub fn has_allocatable(answer: &[u8]) -> bool {
    serde_json::from_slice::<Value>(answer)
        .map(|node| node["status"]["allocatable"]["cpu"] == "4")
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse_by_short_and_kube_names() {
        assert_eq!(Case::parse("spread").unwrap(), Case::Spread);
        assert_eq!(Case::parse("InterPodAffinity").unwrap(), Case::Affinity);
        assert!(Case::parse("fast").is_err());
    }

    #[test]
    fn affinity_pods_select_each_other() {
        let pod: Value = serde_json::from_slice(&pod(Case::Affinity, 3)).unwrap();
        let term = &pod["spec"]["affinity"]["podAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            term["labelSelector"]["matchLabels"]["foo"],
            pod["metadata"]["labels"]["foo"]
        );
    }
}
