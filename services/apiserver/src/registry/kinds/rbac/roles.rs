//! rbac.authorization.k8s.io/v1: Roles and ClusterRoles (rules), and the
//! bindings that grant them, whose roleRef never changes.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{json, Value};

use crate::error::Cause;
use crate::object::meta::NameRule;
use crate::registry::definition::{ResourceDef, WriteCheck};
use crate::registry::kinds::common::cells::{self, CREATED_AT};
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, items};
use crate::registry::kinds::rbac::escalation::{check_binding, check_role};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

const GROUP: &str = "rbac.authorization.k8s.io";

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(Simple::<ClusterRoleBinding> {
            validate: |o| validate_binding(o, false),
            ..binding(cluster(def(
                "clusterrolebindings",
                "ClusterRoleBinding",
                |o, old, r| check_binding("clusterrolebindings", o, old, r),
            )))
        }),
        Arc::new(Simple::<ClusterRole> {
            validate: |o| validate_rules(o, false),
            ..role(cluster(def("clusterroles", "ClusterRole", |o, old, r| {
                check_role("clusterroles", o, old, r)
            })))
        }),
        Arc::new(Simple::<RoleBinding> {
            validate: |o| validate_binding(o, true),
            ..binding(def("rolebindings", "RoleBinding", |o, old, r| {
                check_binding("rolebindings", o, old, r)
            }))
        }),
        Arc::new(Simple::<Role> {
            validate: |o| validate_rules(o, true),
            ..role(def("roles", "Role", |o, old, r| {
                check_role("roles", o, old, r)
            }))
        }),
    ]
}

/// An RBAC kind, whose writes pass `check` (escalation prevention).
fn def(resource: &'static str, kind: &'static str, check: WriteCheck) -> ResourceDef {
    let singular = match kind {
        "Role" => "role",
        "RoleBinding" => "rolebinding",
        "ClusterRole" => "clusterrole",
        _ => "clusterrolebinding",
    };
    ResourceDef {
        name_rule: NameRule::PathSegment,
        write_check: Some(check),
        ..crate::registry::kinds::common::simple::def(GROUP, resource, kind, singular)
    }
}

fn cluster(def: ResourceDef) -> ResourceDef {
    ResourceDef {
        namespaced: false,
        ..def
    }
}

/// Roles have no printer of their own: kube shows them through the
/// default table, a name and the creation time.
fn role<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        columns: || vec![CREATED_AT],
        cells: |o| vec![cells::created_at_cell(o)],
        ..simple(def)
    }
}

fn binding<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        columns: binding_columns,
        cells: binding_cells,
        defaults: binding_defaults,
        validate_update: role_ref_unchanged,
        ..simple(def)
    }
}

/// SetDefaults_Subject and the roleRef's group.
fn binding_defaults(obj: &mut Value) {
    default_at(obj, &["roleRef", "apiGroup"], json!(GROUP));
    for subject in obj
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if matches!(subject["kind"].as_str(), Some("User" | "Group")) {
            default_at(subject, &["apiGroup"], json!(GROUP));
        }
    }
}

/// ValidatePolicyRule: verbs always; non-resource URLs only cluster-wide
/// and alone; resource rules name groups and resources.
fn validate_rules(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, rule) in items(&obj["rules"]) {
        let here = format!("rules[{i}]");
        let count = |field: &str| items(&rule[field]).count();
        if count("verbs") == 0 {
            causes.push(validation::required(
                format!("{here}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if count("nonResourceURLs") > 0 {
            let urls = Value::from(rule["nonResourceURLs"].to_string());
            let field = format!("{here}.nonResourceURLs");
            if namespaced {
                let why = "namespaced rules cannot apply to non-resource URLs";
                causes.push(validation::invalid(&field, &urls, why));
            }
            if count("apiGroups") + count("resources") + count("resourceNames") > 0 {
                let why = "rules cannot apply to both regular resources and non-resource URLs";
                causes.push(validation::invalid(&field, &urls, why));
            }
            continue;
        }
        if count("apiGroups") == 0 {
            let why = "resource rules must supply at least one api group";
            causes.push(validation::required(format!("{here}.apiGroups"), why));
        }
        if count("resources") == 0 {
            let why = "resource rules must supply at least one resource";
            causes.push(validation::required(format!("{here}.resources"), why));
        }
    }
    causes
}

fn validate_binding(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let role_ref = &obj["roleRef"];
    validation::check_enum(
        role_ref,
        "/apiGroup",
        "roleRef.apiGroup",
        &[GROUP],
        &mut causes,
    );
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    match role_ref["kind"].as_str() {
        Some(kind) if kinds.contains(&kind) => {}
        _ => causes.push(validation::unsupported(
            "roleRef.kind",
            &role_ref["kind"],
            kinds,
        )),
    }
    if role_ref["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("roleRef.name"));
    }
    for (i, subject) in items(&obj["subjects"]) {
        causes.extend(subject_causes(
            subject,
            &format!("subjects[{i}]"),
            namespaced,
        ));
    }
    causes
}

fn subject_causes(subject: &Value, here: &str, namespaced: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    if subject["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required(format!("{here}.name")));
    }
    let group_field = format!("{here}.apiGroup");
    match subject["kind"].as_str() {
        Some("ServiceAccount") => {
            validation::check_enum(subject, "/apiGroup", &group_field, &[""], &mut causes);
            // A RoleBinding's own namespace stands in for a missing one.
            if !namespaced && subject["namespace"].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("{here}.namespace")));
            }
        }
        Some("User" | "Group") => {
            validation::check_enum(subject, "/apiGroup", &group_field, &[GROUP], &mut causes);
        }
        _ => causes.push(validation::unsupported(
            format!("{here}.kind"),
            &subject["kind"],
            &["ServiceAccount", "User", "Group"],
        )),
    }
    causes
}

/// A binding's roleRef is fixed: granting another role means a new
/// binding, so that a grant is never widened in place.
fn role_ref_unchanged(new: &Value, old: &Value) -> Vec<Cause> {
    if new["roleRef"] == old["roleRef"] {
        return Vec::new();
    }
    let role_ref = Value::from(new["roleRef"].to_string());
    vec![validation::invalid(
        "roleRef",
        &role_ref,
        "cannot change roleRef",
    )]
}

fn binding_columns() -> Vec<Column> {
    vec![
        Column::new("Role", "string", "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace."),
        AGE,
        Column::wide("Users", "string", "Users in the roleBinding"),
        Column::wide("Groups", "string", "Groups in the roleBinding"),
        Column::wide("ServiceAccounts", "string", "ServiceAccounts in the roleBinding"),
    ]
}

fn binding_cells(obj: &Value) -> Vec<Value> {
    let role_ref = &obj["roleRef"];
    let role = format!(
        "{}/{}",
        role_ref["kind"].as_str().unwrap_or(""),
        role_ref["name"].as_str().unwrap_or("")
    );
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for (_, subject) in items(&obj["subjects"]) {
        let name = subject["name"].as_str().unwrap_or("").to_string();
        match subject["kind"].as_str() {
            Some("User") => users.push(name),
            Some("Group") => groups.push(name),
            Some("ServiceAccount") => {
                let namespace = subject["namespace"].as_str().unwrap_or("");
                accounts.push(format!("{namespace}/{name}"));
            }
            _ => {}
        }
    }
    vec![
        role.into(),
        age_cell(obj),
        users.join(", ").into(),
        groups.join(", ").into(),
        accounts.join(", ").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(causes: Vec<Cause>) -> Vec<String> {
        causes
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let role = json!({"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"resources": ["pods"]},
            {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        assert_eq!(messages(validate_rules(&role, true)), [
            "rules[1].verbs: Required value: verbs must contain at least one value",
            "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[2].nonResourceURLs: Invalid value: \"[\\\"/healthz\\\"]\": namespaced rules cannot apply to non-resource URLs",
        ]);
        assert_eq!(validate_rules(&role, false).len(), 2);
    }

    fn rolebinding(kind: &str, subjects: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "b"}, "roleRef": {"kind": kind, "name": "reader"},
                             "subjects": subjects});
        binding_defaults(&mut obj);
        obj
    }

    #[test]
    fn bindings_default_groups_and_check_kinds() {
        let subjects = json!([{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "app"},
                              {"kind": "Group", "name": "devs"}]);
        let obj = rolebinding("Role", subjects.clone());
        assert_eq!(obj["subjects"][0]["apiGroup"], GROUP);
        assert!(validate_binding(&obj, true).is_empty());
        assert_eq!(
            messages(validate_binding(&obj, false)),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[1].namespace: Required value",
            ]
        );
        let bad = rolebinding("ClusterRole", json!([{"kind": "Robot", "name": "r2"}]));
        assert_eq!(validate_binding(&bad, true)[0].field, "subjects[0].kind");
    }

    #[test]
    fn role_ref_cannot_change() {
        let old = rolebinding("Role", json!([]));
        let mut new = old.clone();
        new["roleRef"]["name"] = "admin".into();
        let causes = role_ref_unchanged(&new, &old);
        assert_eq!(causes[0].field, "roleRef");
        assert!(causes[0].message.ends_with(": cannot change roleRef"));
        assert!(role_ref_unchanged(&old, &old).is_empty());
    }

    #[test]
    fn binding_cells_split_subjects() {
        let mut obj = rolebinding(
            "ClusterRole",
            json!([{"kind": "User", "name": "jane"},
            {"kind": "ServiceAccount", "name": "app", "namespace": "prod"}]),
        );
        obj["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z".into();
        let cells = binding_cells(&obj);
        assert_eq!(cells[0], "ClusterRole/reader");
        assert_eq!(cells[2..], [json!("jane"), json!(""), json!("prod/app")]);
    }
}
