//! The objects of the density run: namespaces of at most
//! [`DEPLOYMENTS_PER_NAMESPACE`] Deployments each (kube's density test
//! spreads its pods over namespaces the same way), each Deployment's pods
//! a pause container asking for little, so 30 of them fit on any node.

use bytes::Bytes;
use serde_json::json;

/// Deployments per namespace: 3,000 pods in a namespace at 100 replicas,
/// what the namespace-scoped list of the probe reads.
pub const DEPLOYMENTS_PER_NAMESPACE: usize = 30;
/// The namespace of the probe's own ConfigMaps.
pub const PROBE_NAMESPACE: &str = "density-probe";
/// The label every measured pod carries.
pub const APP_LABEL: &str = "density";

/// The namespace Deployment `i` lives in.
pub fn namespace_of(deployment: usize) -> String {
    format!("density-{}", deployment / DEPLOYMENTS_PER_NAMESPACE)
}

/// How many namespaces `deployments` Deployments need.
pub fn namespace_count(deployments: usize) -> usize {
    deployments.div_ceil(DEPLOYMENTS_PER_NAMESPACE)
}

pub fn namespace(name: &str) -> Bytes {
    Bytes::from(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).to_string(),
    )
}

pub fn deployment_name(i: usize) -> String {
    format!("density-{i}")
}

/// Deployment `i` with `replicas` pods.
pub fn deployment(i: usize, replicas: usize) -> Bytes {
    let name = deployment_name(i);
    let labels = json!({"app": APP_LABEL, "deployment": name});
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace_of(i)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "pause", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}},
                }]},
            },
        },
    });
    Bytes::from(deployment.to_string())
}

/// A ConfigMap the probe creates, reads and deletes.
pub fn config_map(name: &str) -> Bytes {
    let map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": PROBE_NAMESPACE},
        "data": {"probe": "a small value"},
    });
    Bytes::from(map.to_string())
}

/// A ClusterRole for the probe's calls (ConfigMaps written and read in
/// its namespace, pods listed anywhere) and its binding to `user`.
pub fn probe_role(user: &str) -> (Bytes, Bytes) {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": PROBE_ROLE},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "delete"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]});
    (Bytes::from(role.to_string()), probe_binding(user))
}

const PROBE_ROLE: &str = "density-probe";

/// A binding of the probe's ClusterRole to `user`, named after the user.
pub fn probe_binding(user: &str) -> Bytes {
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": PROBE_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    Bytes::from(binding.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_hold_thirty_deployments() {
        assert_eq!(namespace_of(0), "density-0");
        assert_eq!(namespace_of(29), "density-0");
        assert_eq!(namespace_of(30), "density-1");
        assert_eq!(namespace_count(300), 10);
        assert_eq!(namespace_count(10), 1);
    }

    #[test]
    fn a_deployment_selects_its_pods() {
        let body: serde_json::Value = serde_json::from_slice(&deployment(3, 7)).unwrap();
        assert_eq!(body["spec"]["replicas"], 7);
        assert_eq!(
            body["spec"]["selector"]["matchLabels"],
            body["spec"]["template"]["metadata"]["labels"]
        );
    }
}
