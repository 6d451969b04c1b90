//! The bootstrap roles of the components around the API server, as kube
//! ships them: the scheduler (`system:kube-scheduler`, and
//! `system:volume-scheduler` bound to the same user), the kubelet
//! (`system:node`), kube-proxy (`system:node-proxier`), and what the API
//! server itself needs from kubelets (`system:kubelet-api-admin`); plus
//! the identity of Capstan's simulated nodes (`system:capstan-nodes`).
//!
//! As in kube, `system:node` is bound to nobody: the Node authorizer
//! admits kubelets (with these rules, narrowed by its graph), and the
//! NodeRestriction admission plugin keeps each to its own objects.

use serde_json::{json, Value};

use super::bootstrap_objects::{cluster_role, events, metadata, named, role, role_binding, rule};
use super::objects::GROUP;
use crate::auth::NODES_GROUP;

/// The user kube-scheduler authenticates as.
pub const SCHEDULER_USER: &str = "system:kube-scheduler";
/// The user of the process that runs simulated nodes and impersonates them.
pub const NODE_SIMULATOR_USER: &str = "system:capstan-nodes";

const READ: &[&str] = &["get", "list", "watch"];
const CREATE: &[&str] = &["create"];
const CORE: &str = "";
const COORDINATION: &str = "coordination.k8s.io";
const STORAGE: &str = "storage.k8s.io";

/// Delegated authentication and authorization: what a component asks of
/// the API server about its own callers.
fn reviews() -> Vec<Value> {
    vec![
        rule(CREATE, &["authentication.k8s.io"], &["tokenreviews"]),
        rule(CREATE, &["authorization.k8s.io"], &["subjectaccessreviews"]),
    ]
}

fn scheduler() -> Value {
    let mut rules = vec![
        events(),
        rule(CREATE, &[COORDINATION], &["leases"]),
        named(
            &["get", "update"],
            &[COORDINATION],
            &["leases"],
            &["kube-scheduler"],
        ),
        rule(CREATE, &[CORE], &["endpoints"]),
        named(
            &["get", "update"],
            &[CORE],
            &["endpoints"],
            &["kube-scheduler"],
        ),
        rule(READ, &[CORE], &["nodes"]),
        rule(&["delete", "get", "list", "watch"], &[CORE], &["pods"]),
        rule(CREATE, &[CORE], &["bindings", "pods/binding"]),
        rule(&["patch", "update"], &[CORE], &["pods/status"]),
        rule(
            READ,
            &[CORE],
            &["replicationcontrollers", "services", "namespaces"],
        ),
        rule(READ, &["apps", "extensions"], &["replicasets"]),
        rule(READ, &["apps"], &["statefulsets"]),
        rule(READ, &["policy"], &["poddisruptionbudgets"]),
        rule(
            READ,
            &[CORE],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(
            READ,
            &[STORAGE],
            &["csinodes", "csidrivers", "csistoragecapacities"],
        ),
    ];
    rules.extend(reviews());
    cluster_role(SCHEDULER_USER, &[], rules)
}

fn volume_scheduler() -> Value {
    let read_write = &["get", "list", "patch", "update", "watch"];
    cluster_role(
        "system:volume-scheduler",
        &[],
        vec![
            rule(read_write, &[CORE], &["persistentvolumes"]),
            rule(READ, &[STORAGE], &["storageclasses"]),
            rule(read_write, &[CORE], &["persistentvolumeclaims"]),
        ],
    )
}

/// kube's `system:node` ClusterRole: what the Node authorizer allows a
/// node beyond what it decides from its graph.
pub fn node() -> Value {
    let mut rules = reviews();
    rules.extend([
        rule(READ, &[CORE], &["services"]),
        rule(
            &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ],
            &[CORE],
            &["nodes"],
        ),
        rule(&["patch", "update"], &[CORE], &["nodes/status"]),
        events(),
        rule(
            &["create", "delete", "get", "list", "watch"],
            &[CORE],
            &["pods"],
        ),
        rule(&["patch", "update"], &[CORE], &["pods/status"]),
        rule(CREATE, &[CORE], &["pods/eviction"]),
        rule(READ, &[CORE], &["configmaps", "secrets"]),
        rule(
            &["get"],
            &[CORE],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], &[CORE], &["endpoints"]),
        rule(
            &["create", "get", "list", "watch"],
            &["certificates.k8s.io"],
            &["certificatesigningrequests"],
        ),
        rule(
            &["create", "delete", "get", "patch", "update"],
            &[COORDINATION],
            &["leases"],
        ),
        rule(&["get"], &[STORAGE], &["volumeattachments"]),
        rule(CREATE, &[CORE], &["serviceaccounts/token"]),
        rule(READ, &[STORAGE], &["csidrivers"]),
        rule(
            &["create", "delete", "get", "patch", "update"],
            &[STORAGE],
            &["csinodes"],
        ),
        rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
    ]);
    cluster_role("system:node", &[], rules)
}

fn node_proxier() -> Value {
    cluster_role(
        "system:node-proxier",
        &[],
        vec![
            rule(&["list", "watch"], &[CORE], &["services", "endpoints"]),
            rule(READ, &[CORE], &["nodes"]),
            events(),
            rule(
                &["list", "watch"],
                &["discovery.k8s.io"],
                &["endpointslices"],
            ),
        ],
    )
}

fn kubelet_api_admin() -> Value {
    cluster_role(
        "system:kubelet-api-admin",
        &[],
        vec![
            rule(&["get", "list", "watch", "proxy"], &[CORE], &["nodes"]),
            rule(
                &["*"],
                &[CORE],
                &["nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"],
            ),
        ],
    )
}

/// What a simulated-nodes process does as itself, cluster-wide: watch
/// the pods bound to nodes and list nodes (its writes go as the nodes,
/// impersonated), authorize callers of its kubelet API, and register
/// metrics.k8s.io's APIService (that one object, by name). What it writes
/// in `kube-system` is a Role there (`namespaced_roles`); which node users
/// it may impersonate is granted apart, by name, by whoever starts it
/// (capstan-nodes's `impersonation` module).
fn node_simulator() -> Value {
    let mut rules = reviews();
    rules.extend([
        named(&["impersonate"], &[CORE], &["groups"], &[NODES_GROUP]),
        rule(READ, &[CORE], &["pods", "nodes"]),
        named(
            &["create", "get", "patch", "update"],
            &["apiregistration.k8s.io"],
            &["apiservices"],
            &[METRICS_API_SERVICE],
        ),
        events(),
    ]);
    cluster_role(NODE_SIMULATOR_USER, &[], rules)
}

/// The APIService a simulated-nodes process registers (metrics.k8s.io).
const METRICS_API_SERVICE: &str = "v1beta1.metrics.k8s.io";
/// The Service (and Endpoints) in `kube-system` it points at.
const NODE_SIMULATOR_SERVICE: &str = "capstan-nodes";
const KUBE_SYSTEM: &str = "kube-system";

/// What a simulated-nodes process may do in `kube-system` and nowhere
/// else: its own Service and Endpoints (applied server-side, so even a
/// create names them), and the client CA published for extension API
/// servers (kube's `extension-apiserver-authentication` ConfigMap).
fn node_simulator_in_kube_system() -> Value {
    role(
        KUBE_SYSTEM,
        NODE_SIMULATOR_USER,
        vec![
            named(
                &["create", "get", "patch", "update"],
                &[CORE],
                &["services", "endpoints"],
                &[NODE_SIMULATOR_SERVICE],
            ),
            named(
                &["get"],
                &[CORE],
                &["configmaps"],
                &["extension-apiserver-authentication"],
            ),
        ],
    )
}

pub fn namespaced_roles() -> Vec<Value> {
    vec![node_simulator_in_kube_system()]
}

pub fn namespaced_role_bindings() -> Vec<Value> {
    vec![role_binding(
        KUBE_SYSTEM,
        NODE_SIMULATOR_USER,
        vec![subject("User", NODE_SIMULATOR_USER)],
    )]
}

pub fn cluster_roles() -> Vec<Value> {
    vec![
        scheduler(),
        volume_scheduler(),
        node(),
        node_proxier(),
        kubelet_api_admin(),
        node_simulator(),
    ]
}

fn subject(kind: &str, name: &str) -> Value {
    json!({"apiGroup": GROUP, "kind": kind, "name": name})
}

fn binding(role: &str, subjects: Vec<Value>) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding",
           "metadata": metadata(role, &[]),
           "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

/// What kubeadm binds for the API server's kubelet client: the kubelet
/// API (`nodes/proxy`, ...), which kubelets check with a
/// SubjectAccessReview before they serve a log or an exec.
fn kubelet_client_binding() -> Value {
    binding(
        "system:kubelet-api-admin",
        vec![subject("User", crate::pki::KUBELET_CLIENT)],
    )
}

pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        kubelet_client_binding(),
        binding(SCHEDULER_USER, vec![subject("User", SCHEDULER_USER)]),
        binding(
            "system:volume-scheduler",
            vec![subject("User", SCHEDULER_USER)],
        ),
        binding("system:node", vec![]),
        binding(
            "system:node-proxier",
            vec![subject("User", "system:kube-proxy")],
        ),
        binding(
            NODE_SIMULATOR_USER,
            vec![subject("User", NODE_SIMULATOR_USER)],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_names_a_role_of_this_policy() {
        let roles: Vec<Value> = cluster_roles();
        let names: Vec<&str> = roles
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap())
            .collect();
        for binding in cluster_role_bindings() {
            let role = binding["roleRef"]["name"].as_str().unwrap();
            assert!(names.contains(&role), "{role} is bound but not defined");
        }
        let roles = namespaced_roles();
        for binding in namespaced_role_bindings() {
            let defined = roles.iter().any(|r| {
                r["metadata"]["namespace"] == binding["metadata"]["namespace"]
                    && r["metadata"]["name"] == binding["roleRef"]["name"]
            });
            assert!(defined, "{binding} binds a Role not defined beside it");
        }
    }
}
