//! Start-up reconciliation of the bootstrap policy, with kube's
//! semantics: a missing object is created; one annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"` is left alone;
//! any other gets back what the policy grants (missing labels,
//! annotations, rules, aggregation selectors, subjects) while keeping what
//! was added to it; a binding whose roleRef changed is recreated.

use serde_json::{json, Map, Value};

use super::objects::{key_of, Kind};
use super::policy::{self, AUTO_UPDATE};
use super::store;
use crate::auth::PolicyRule;
use crate::error::ApiError;
use crate::registry::kinds::rbac::covers;
use crate::registry::Catalog;

const MANAGER: &str = "rbac-bootstrap";

/// Reconciles every bootstrap role, then every binding: cluster-wide
/// ones, then those of a namespace.
pub async fn bootstrap(catalog: &Catalog) -> Result<(), ApiError> {
    let kinds = [
        (Kind::ClusterRole, policy::cluster_roles()),
        (Kind::Role, policy::namespaced_roles()),
        (Kind::ClusterRoleBinding, policy::cluster_role_bindings()),
        (Kind::RoleBinding, policy::namespaced_role_bindings()),
    ];
    for (kind, objects) in kinds {
        for object in objects {
            reconcile(catalog, kind, object).await?;
        }
    }
    Ok(())
}

/// How often one object is read again after losing a race.
const ATTEMPTS: usize = 5;

/// Reconciles one object; another API server starting at the same time
/// may create or change it between our read and our write, so a lost race
/// (AlreadyExists, Conflict, NotFound) reads again and retries, as kube's
/// bootstrap does on conflict.
async fn reconcile(catalog: &Catalog, kind: Kind, expected: Value) -> Result<(), ApiError> {
    let mut attempt = 1;
    loop {
        match reconcile_once(catalog, kind, expected.clone()).await {
            Err(err) if attempt < ATTEMPTS && lost_race(&err) => {
                tracing::info!(%err, attempt, "bootstrap policy raced another writer; again");
                attempt += 1;
            }
            done => return done,
        }
    }
}

fn lost_race(err: &ApiError) -> bool {
    matches!(
        err,
        ApiError::AlreadyExists(_) | ApiError::Conflict(..) | ApiError::NotFound(_)
    )
}

async fn reconcile_once(catalog: &Catalog, kind: Kind, expected: Value) -> Result<(), ApiError> {
    let (namespace, name) = key_of(&expected);
    let Some(existing) = store::get(catalog, kind, &namespace, &name).await? else {
        return store::create(catalog, kind, expected, MANAGER).await;
    };
    if existing["metadata"]["annotations"][AUTO_UPDATE] == "false" {
        return Ok(());
    }
    let binding = matches!(kind, Kind::ClusterRoleBinding | Kind::RoleBinding);
    if binding && existing["roleRef"] != expected["roleRef"] {
        tracing::info!(name, "recreating a bootstrap binding whose roleRef changed");
        store::delete(catalog, kind, &namespace, &name).await?;
        return store::create(catalog, kind, expected, MANAGER).await;
    }
    let reconciled = match binding {
        true => reconciled_binding(&existing, &expected),
        false => reconciled_role(&existing, &expected),
    };
    match reconciled {
        Some(updated) => {
            tracing::info!(name, kind = kind.name(), "reconciling bootstrap policy");
            store::update(catalog, kind, updated, MANAGER).await
        }
        None => Ok(()),
    }
}

/// Missing labels and annotations added (the existing values win).
fn merge_metadata(result: &mut Value, expected: &Value) -> bool {
    let mut changed = false;
    for field in ["labels", "annotations"] {
        let wanted = expected["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let have = &mut result["metadata"][field];
        if !have.is_object() {
            *have = Value::Object(Map::new());
        }
        let have = have.as_object_mut().expect("an object");
        for (key, value) in wanted {
            if !have.contains_key(&key) {
                have.insert(key, value);
                changed = true;
            }
        }
    }
    changed
}

/// The role with what the policy grants added; None when nothing lacks.
pub fn reconciled_role(existing: &Value, expected: &Value) -> Option<Value> {
    let mut result = existing.clone();
    let mut changed = merge_metadata(&mut result, expected);
    let expected_rule = &expected["aggregationRule"];
    if expected_rule.is_null() {
        if !existing["aggregationRule"].is_null() {
            result.as_object_mut()?.remove("aggregationRule");
            changed = true;
        }
        // Whole rules of the policy that the role does not cover yet.
        let have = PolicyRule::all_of(existing);
        for rule in expected["rules"].as_array().into_iter().flatten() {
            let Ok(parsed) = serde_json::from_value::<PolicyRule>(rule.clone()) else {
                continue;
            };
            if !covers::missing(&have, &[parsed]).is_empty() {
                push(&mut result["rules"], rule.clone());
                changed = true;
            }
        }
    } else {
        // Aggregated: the controller fills the rules; only selectors here.
        let selectors = &mut result["aggregationRule"]["clusterRoleSelectors"];
        for selector in expected_rule["clusterRoleSelectors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let present = selectors.as_array().is_some_and(|s| s.contains(selector));
            if !present {
                push(selectors, selector.clone());
                changed = true;
            }
        }
    }
    changed.then_some(result)
}

/// The binding with the policy's subjects added; None when none lack.
pub fn reconciled_binding(existing: &Value, expected: &Value) -> Option<Value> {
    let mut result = existing.clone();
    let mut changed = merge_metadata(&mut result, expected);
    for subject in expected["subjects"].as_array().into_iter().flatten() {
        let present = existing["subjects"]
            .as_array()
            .is_some_and(|s| s.iter().any(|have| same_subject(have, subject)));
        if !present {
            push(&mut result["subjects"], subject.clone());
            changed = true;
        }
    }
    changed.then_some(result)
}

fn same_subject(a: &Value, b: &Value) -> bool {
    a["kind"] == b["kind"] && a["name"] == b["name"] && a["namespace"] == b["namespace"]
}

fn push(list: &mut Value, item: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(items) = list.as_array_mut() {
        items.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciliation_adds_what_lacks_and_keeps_what_was_added() {
        let expected = policy::cluster_roles()
            .into_iter()
            .find(|r| r["metadata"]["name"] == "system:basic-user")
            .unwrap();
        assert!(reconciled_role(&expected, &expected).is_none());
        let mut edited = expected.clone();
        edited["rules"] = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        edited["metadata"]["labels"] = json!({"team": "a"});
        let fixed = reconciled_role(&edited, &expected).unwrap();
        assert_eq!(fixed["rules"].as_array().unwrap().len(), 3);
        assert_eq!(fixed["rules"][0]["resources"][0], "pods");
        assert_eq!(fixed["metadata"]["labels"]["team"], "a");
        assert_eq!(
            fixed["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );

        let binding = policy::cluster_role_bindings().remove(3);
        let mut trimmed = binding.clone();
        trimmed["subjects"] = json!([{"kind": "User", "name": "ops"}]);
        let fixed = reconciled_binding(&trimmed, &binding).unwrap();
        assert_eq!(fixed["subjects"].as_array().unwrap().len(), 3);
        assert!(reconciled_binding(&fixed, &binding).is_none());
    }
}
