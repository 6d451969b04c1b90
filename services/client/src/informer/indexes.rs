//! Index functions the components share, with their names. Add one to an
//! informer with [`Informer::add_index`](super::Informer::add_index).

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;

/// Pods by `spec.nodeName` (unscheduled pods are not filed).
pub const BY_NODE_NAME: &str = "spec.nodeName";
/// Objects by the uid of each of their owners.
pub const BY_OWNER_UID: &str = "owner-uid";

/// The node a pod is bound to.
pub fn pod_node_name(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .into_iter()
        .collect()
}

/// The uids of an object's owners.
pub fn owner_uids<K: Resource>(object: &K) -> Vec<String> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_are_filed_by_node_and_owner() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1"}
            ]},
            "spec": {"nodeName": "n1", "containers": []},
        }))
        .unwrap();
        assert_eq!(pod_node_name(&pod), ["n1"]);
        assert_eq!(owner_uids(&pod), ["u1"]);
        let pending: Pod = serde_json::from_value(json!({"metadata": {"name": "q"}})).unwrap();
        assert!(pod_node_name(&pending).is_empty());
        assert!(owner_uids(&pending).is_empty());
    }
}
