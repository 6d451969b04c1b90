//! The shapes of the bootstrap policy's objects: rules, the labels and
//! annotation every bootstrap object carries, ClusterRoles. Shared by the
//! files that list the policy (`policy.rs`, `component_policy.rs`).

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
