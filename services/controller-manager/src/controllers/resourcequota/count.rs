//! Recounting one quota, as kube's resource-quota controller does: what
//! the namespace's objects of each counted type use (through the shared
//! `capstan-quota` evaluators, so admission and this controller agree),
//! read from the API (consistent lists: a cache that trails admission
//! would count too little).

use capstan_quota::{scopes, usage};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{Discovery, Scope};
use serde_json::Value;

use crate::error::Result;

/// The types a quota's names count: `count/<resource>[.<group>]`, the
/// legacy core plurals, and compute resources (about pods).
pub fn counted_types(tracked: &[String]) -> Vec<(String, String)> {
    let mut types: Vec<(String, String)> = Vec::new();
    for name in tracked {
        let counted = match name.strip_prefix("count/") {
            Some(rest) => match rest.split_once('.') {
                Some((resource, group)) => (group.to_string(), resource.to_string()),
                None => (String::new(), rest.to_string()),
            },
            None if usage::count_names("", name).len() > 1 => (String::new(), name.clone()),
            None => (String::new(), "pods".to_string()),
        };
        if !types.contains(&counted) {
            types.push(counted);
        }
    }
    types
}

/// The served type `group`/`resource` (namespaced only: quotas count
/// namespaced objects), if any.
pub async fn resolve(
    client: &kube::Client,
    group: &str,
    resource: &str,
) -> Result<Option<ApiResource>> {
    let discovery = Discovery::new(client.clone())
        .filter(&[group])
        .run()
        .await?;
    let Some(api_group) = discovery.get(group) else {
        return Ok(None);
    };
    let found = api_group
        .recommended_resources()
        .into_iter()
        .find(|(r, caps)| r.plural == resource && caps.scope == Scope::Namespaced)
        .map(|(r, _)| r);
    Ok(found)
}

/// What the objects `quota` counts in `namespace` use of `tracked`.
pub async fn count(
    client: &kube::Client,
    types: &[(String, String, ApiResource)],
    quota: &Value,
    namespace: &str,
    tracked: &[String],
) -> Result<usage::Usage> {
    let mut total: usage::Usage = tracked.iter().map(|n| (n.clone(), 0.0)).collect();
    for (group, resource, api_resource) in types {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, api_resource);
        let list = api.list(&ListParams::default()).await?;
        for item in list.items {
            let object = serde_json::to_value(&item).unwrap_or_default();
            if !scopes::counts(quota, group, resource, &object) {
                continue;
            }
            for (name, amount) in usage::of_object(group, resource, &object, tracked) {
                *total.entry(name).or_default() += amount;
            }
        }
    }
    Ok(total)
}

/// The quota's new status, when it needs writing: the hard limits
/// changed, a tracked name is missing, usage rose, or usage fell and the
/// quota is `stable` (unchanged since the last recount: a fall seen while
/// admission just charged a create not yet stored must not undo it).
pub fn next_status(quota: &Value, counted: &usage::Usage, stable: bool) -> Option<Value> {
    let hard = &quota["spec"]["hard"];
    let used = usage::parse(&quota["status"]["used"]);
    let fresh = quota["status"]["hard"] != *hard || counted.keys().any(|n| !used.contains_key(n));
    let higher = counted
        .iter()
        .any(|(n, v)| used.get(n).is_none_or(|u| v > u));
    let lower = counted
        .iter()
        .any(|(n, v)| used.get(n).is_some_and(|u| v < u));
    if !(fresh || higher || (lower && stable)) {
        return None;
    }
    Some(serde_json::json!({"hard": hard, "used": usage::to_json(counted)}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_map_to_the_types_they_count() {
        let tracked: Vec<String> = [
            "pods",
            "requests.cpu",
            "count/deployments.apps",
            "count/configmaps",
            "services",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let types = counted_types(&tracked);
        assert!(types.contains(&(String::new(), "pods".into())));
        assert!(types.contains(&("apps".into(), "deployments".into())));
        assert!(types.contains(&(String::new(), "configmaps".into())));
        assert!(types.contains(&(String::new(), "services".into())));
        assert_eq!(types.len(), 4);
    }

    #[test]
    fn falls_wait_for_a_stable_quota_rises_do_not() {
        let quota = json!({"spec": {"hard": {"pods": "10"}}, "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}}});
        let counted = |n: f64| usage::Usage::from([("pods".to_string(), n)]);
        assert!(next_status(&quota, &counted(3.0), true).is_none());
        assert_eq!(
            next_status(&quota, &counted(4.0), false).unwrap()["used"]["pods"],
            "4"
        );
        assert!(next_status(&quota, &counted(2.0), false).is_none());
        assert_eq!(
            next_status(&quota, &counted(2.0), true).unwrap()["used"]["pods"],
            "2"
        );
        let changed = json!({"spec": {"hard": {"pods": "5"}}, "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}}});
        assert_eq!(
            next_status(&changed, &counted(3.0), false).unwrap()["hard"]["pods"],
            "5"
        );
    }
}
