//! Whether and when a pod must leave a node with NoExecute taints (kube's
//! taint manager): a pod that does not tolerate every such taint goes at
//! once; one that tolerates them all stays for the shortest
//! `tolerationSeconds` among the tolerations used (forever if none sets
//! one). The time runs from when the taint was put on (its `timeAdded`),
//! or from when the pod was created if that is later, rather than from
//! when this process first saw it: a controller that takes over from
//! another keeps the same deadline instead of starting it afresh.

use capstan_component_helpers::tolerations::tolerates;
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::chrono::{DateTime, Duration, Utc};

pub const NO_EXECUTE: &str = "NoExecute";

/// What to do about a pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// It may stay (no NoExecute taint, or all tolerated forever).
    Stay,
    /// It goes at this time (at once if it has passed).
    EvictAt(DateTime<Utc>),
}

/// The node's NoExecute taints.
pub fn no_execute_taints(node: &Node) -> Vec<&Taint> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    taints
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == NO_EXECUTE)
        .collect()
}

/// Whether two nodes differ in their NoExecute taints (key, value; the
/// time added does not change a decision's inputs beyond the taint).
pub fn no_execute_changed(old: &Node, new: &Node) -> bool {
    let identity = |node: &Node| {
        let mut taints: Vec<(String, Option<String>, Option<String>)> = no_execute_taints(node)
            .into_iter()
            .map(|t| {
                let added = t.time_added.as_ref().map(|a| a.0.to_rfc3339());
                (t.key.clone(), t.value.clone(), added)
            })
            .collect();
        taints.sort();
        taints
    };
    identity(old) != identity(new)
}

/// The decision for `pod` on `node` at `now`.
pub fn decide(pod: &Pod, node: &Node, now: DateTime<Utc>) -> Decision {
    let taints = no_execute_taints(node);
    if taints.is_empty() {
        return Decision::Stay;
    }
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref());
    let tolerations = tolerations.unwrap_or_default();
    let mut used: Vec<&Toleration> = Vec::new();
    for taint in &taints {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(toleration) => used.push(toleration),
            None => return Decision::EvictAt(now),
        }
    }
    let Some(shortest) = used.iter().filter_map(|t| t.toleration_seconds).min() else {
        return Decision::Stay;
    };
    if shortest <= 0 {
        return Decision::EvictAt(now);
    }
    let tainted = taints
        .iter()
        .filter_map(|t| t.time_added.as_ref())
        .map(|t| t.0)
        .min();
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let start = match (tainted, created) {
        (Some(tainted), Some(created)) => tainted.max(created),
        (Some(tainted), None) => tainted,
        (None, _) => now,
    };
    // A start in the future (another clock) counts from now.
    Decision::EvictAt(start.min(now) + Duration::seconds(shortest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    fn node(added: DateTime<Utc>) -> Node {
        object(json!({"metadata": {"name": "n1"}, "spec": {"taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": added.to_rfc3339()},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        ]}}))
    }

    fn pod(tolerations: serde_json::Value) -> Pod {
        object(json!({"metadata": {"name": "p", "namespace": "default",
            "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [], "tolerations": tolerations}}))
    }

    #[test]
    fn the_shortest_toleration_counts_from_when_the_taint_came() {
        let now = Utc::now();
        let added = now - Duration::seconds(100);
        let unreachable_300 = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300}]);
        assert_eq!(
            decide(&pod(unreachable_300), &node(added), now),
            Decision::EvictAt(added + Duration::seconds(300))
        );
        assert_eq!(
            decide(&pod(json!([])), &node(added), now),
            Decision::EvictAt(now)
        );
        let forever = json!([{"operator": "Exists"}]);
        assert_eq!(decide(&pod(forever), &node(added), now), Decision::Stay);
        let zero = json!([{"operator": "Exists", "tolerationSeconds": 0}]);
        assert_eq!(
            decide(&pod(zero), &node(added), now),
            Decision::EvictAt(now)
        );
        let both = json!([{"operator": "Exists", "tolerationSeconds": 600},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30}]);
        // The first matching toleration is the one used.
        assert_eq!(
            decide(&pod(both), &node(added), now),
            Decision::EvictAt(added + Duration::seconds(600))
        );
        let untainted: Node = object(json!({"metadata": {"name": "n1"}}));
        assert_eq!(decide(&pod(json!([])), &untainted, now), Decision::Stay);
    }

    #[test]
    fn a_pod_newer_than_the_taint_counts_from_its_creation() {
        let now = Utc::now();
        let added = now - Duration::seconds(100);
        let mut young = pod(json!([{"operator": "Exists", "tolerationSeconds": 60}]));
        let created = now - Duration::seconds(10);
        young.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created),
        );
        assert_eq!(
            decide(&young, &node(added), now),
            Decision::EvictAt(created + Duration::seconds(60))
        );
        let mut tainted_later = node(now);
        assert!(no_execute_changed(&node(added), &tainted_later));
        tainted_later
            .spec
            .as_mut()
            .unwrap()
            .taints
            .as_mut()
            .unwrap()
            .pop();
        assert!(
            !no_execute_changed(&node(now), &tainted_later),
            "NoSchedule only"
        );
    }
}
