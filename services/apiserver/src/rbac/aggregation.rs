//! The ClusterRole aggregation controller (kube-controller-manager's
//! clusterrole-aggregation): a ClusterRole with an `aggregationRule`
//! holds the rules of every other ClusterRole its `clusterRoleSelectors`
//! pick, in name order, each rule once. It runs on every new snapshot of
//! the RBAC objects, so `admin`, `edit` and `view` follow the roles
//! labelled into them, chained aggregations included.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::informer::{Shared, Snapshot};
use super::objects::{Kind, Objects};
use super::store;
use crate::auth::PolicyRule;
use crate::error::ApiError;
use crate::object::meta;
use crate::object::selector::LabelSelector;
use crate::registry::Catalog;

const MANAGER: &str = "clusterrole-aggregation-controller";
/// Passes at start-up, enough for kube's deepest chain (view → edit → admin).
const SETTLE_PASSES: usize = 8;
const SETTLE_WAIT: Duration = Duration::from_secs(2);

/// A `clusterRoleSelectors` entry as selector text (`k=v,k in (a,b)`).
fn selector_text(selector: &Value) -> String {
    let mut parts = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        parts.push(format!("{key}={}", value.as_str().unwrap_or("")));
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or("");
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match expression["operator"].as_str() {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("DoesNotExist") => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    parts.join(",")
}

/// The rules `role` should hold, or None when it is not aggregated.
pub fn aggregate(objects: &Objects, role: &Value) -> Option<Vec<PolicyRule>> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array()?;
    let own = meta::name(role);
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors {
        // A selector that does not parse picks nothing.
        let Ok(selector) = LabelSelector::parse(&selector_text(selector)) else {
            continue;
        };
        // `Objects` keeps them in name order.
        for other in objects.of(Kind::ClusterRole).values() {
            if meta::name(other) == own || !selector.matches(meta::labels(other)) {
                continue;
            }
            for rule in PolicyRule::all_of(other) {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    Some(rules)
}

/// The aggregated roles whose rules are not what they should be, updated.
pub fn pending(objects: &Objects) -> Vec<Value> {
    let mut updated = Vec::new();
    for role in objects.of(Kind::ClusterRole).values() {
        let Some(rules) = aggregate(objects, role) else {
            continue;
        };
        if PolicyRule::all_of(role) == rules {
            continue;
        }
        let mut role = role.as_ref().clone();
        role["rules"] = serde_json::to_value(&rules).unwrap_or_default();
        updated.push(role);
    }
    updated
}

/// Writes what `snapshot` says is pending; a conflict is left for the
/// next snapshot, which the conflicting write brings.
async fn pass(catalog: &Catalog, snapshot: &Snapshot) -> usize {
    let pending = pending(&snapshot.objects);
    for role in &pending {
        let name = meta::name(role).to_string();
        if let Err(err) = store::update(catalog, Kind::ClusterRole, role.clone(), MANAGER).await {
            tracing::debug!(name, %err, "aggregation deferred");
        }
    }
    pending.len()
}

/// At start-up: aggregate until nothing is pending, so the first request
/// already sees `admin`, `edit` and `view` filled.
pub async fn settle(catalog: &Catalog, shared: &mut Shared) -> Result<(), ApiError> {
    for _ in 0..SETTLE_PASSES {
        let snapshot = shared.borrow_and_update().clone();
        if pass(catalog, &snapshot).await == 0 {
            return Ok(());
        }
        let _ = tokio::time::timeout(SETTLE_WAIT, shared.changed()).await;
    }
    Err(ApiError::Internal(
        "the aggregated ClusterRoles did not settle at start-up".into(),
    ))
}

/// Runs for the life of the server.
pub async fn run(catalog: Arc<Catalog>, mut shared: Shared) {
    loop {
        let snapshot = shared.borrow_and_update().clone();
        pass(&catalog, &snapshot).await;
        if shared.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aggregated_roles_gather_the_rules_their_selectors_pick_through_chains() {
        let mut objects = Objects::default();
        for role in super::super::policy::cluster_roles() {
            objects.put(Kind::ClusterRole, Arc::new(role));
        }
        let extra = json!({"metadata": {"name": "crd-view", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]});
        objects.put(Kind::ClusterRole, Arc::new(extra));
        // Fill until nothing is pending, as the controller does.
        for _ in 0..SETTLE_PASSES {
            for role in pending(&objects) {
                objects.put(Kind::ClusterRole, Arc::new(role));
            }
        }
        assert!(pending(&objects).is_empty());
        let rules =
            |name: &str| PolicyRule::all_of(objects.get(Kind::ClusterRole, "", name).unwrap());
        let widgets = PolicyRule::all_of(objects.get(Kind::ClusterRole, "", "crd-view").unwrap());
        for name in ["view", "edit", "admin"] {
            assert!(rules(name).contains(&widgets[0]), "{name}");
        }
        assert!(rules("admin").len() > rules("edit").len());
        assert!(rules("edit").len() > rules("view").len());
        let expressions = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                                      {"key": "x", "operator": "DoesNotExist"}]});
        assert_eq!(selector_text(&expressions), "tier in (a,b),!x");
    }
}
