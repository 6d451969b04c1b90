//! The shapes of the bootstrap policy's objects: rules, the labels and
//! annotation every bootstrap object carries, ClusterRoles, and the Roles
//! of one namespace. Shared by the files that list the policy
//! (`policy.rs`, `component_policy.rs`).

use serde_json::{json, Value};

use super::objects::GROUP;

pub const AUTO_UPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

pub fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

pub fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

pub fn metadata(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for (key, value) in extra_labels {
        labels[*key] = json!(value);
    }
    json!({"name": name, "labels": labels, "annotations": {AUTO_UPDATE: "true"}})
}

pub fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole",
           "metadata": metadata(name, labels), "rules": rules})
}

/// A Role of `namespace` (kube's bootstrap policy keeps a few in
/// `kube-system`, for rights that need not reach other namespaces).
pub fn role(namespace: &str, name: &str, rules: Vec<Value>) -> Value {
    let mut metadata = metadata(name, &[]);
    metadata["namespace"] = json!(namespace);
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Role",
           "metadata": metadata, "rules": rules})
}

/// A RoleBinding of `namespace` granting its Role `role` to `subjects`.
pub fn role_binding(namespace: &str, role: &str, subjects: Vec<Value>) -> Value {
    let mut metadata = metadata(role, &[]);
    metadata["namespace"] = json!(namespace);
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "RoleBinding",
           "metadata": metadata,
           "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role},
           "subjects": subjects})
}

/// A rule limited to the objects named.
pub fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    let mut value = rule(verbs, groups, resources);
    value["resourceNames"] = json!(names);
    value
}

/// Writing Events, in both groups that hold them.
pub fn events() -> Value {
    rule(
        &["create", "update", "patch"],
        &["", "events.k8s.io"],
        &["events"],
    )
}
