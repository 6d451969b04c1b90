//! Which requests a policy (its `matchConstraints`) or a binding (its
//! `matchResources`) covers: resource rules by operation, group,
//! version, resource (with kube's `*`, `*/*`, `pods/*`, `*/scale`
//! forms), scope and names, minus the excluded ones, and the namespace
//! and object label selectors.

use serde_json::Value;

use crate::admission::Attributes;
use crate::object::selector::LabelSelector;

/// Whether `constraints` cover the request. `namespace` is the request's
/// namespace object (None for cluster-scoped requests). A selector that
/// does not parse is an error (the policy is misconfigured).
pub fn covers(
    constraints: &Value,
    a: &Attributes<'_>,
    object: Option<&Value>,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    let rules = constraints["resourceRules"].as_array();
    if rules.is_some_and(|r| !r.is_empty() && !r.iter().any(|rule| rule_covers(rule, a))) {
        return Ok(false);
    }
    let excluded = constraints["excludeResourceRules"].as_array();
    if excluded.is_some_and(|r| r.iter().any(|rule| rule_covers(rule, a))) {
        return Ok(false);
    }
    if !namespace_selected(&constraints["namespaceSelector"], a, object, namespace)? {
        return Ok(false);
    }
    object_selected(&constraints["objectSelector"], object, a.old_object)
}

/// One `NamedRuleWithOperations`.
fn rule_covers(rule: &Value, a: &Attributes<'_>) -> bool {
    let lists = |field: &str, value: &str| {
        let items = rule[field].as_array().into_iter().flatten();
        items
            .filter_map(Value::as_str)
            .any(|item| item == "*" || item == value)
    };
    let names = rule["resourceNames"].as_array().filter(|n| !n.is_empty());
    lists("operations", a.operation.as_str())
        && lists("apiGroups", a.group)
        && lists("apiVersions", a.version)
        && resource_listed(rule, a.resource, a.subresource)
        && scope_covers(rule["scope"].as_str().unwrap_or("*"), a.namespace)
        && names.is_none_or(|n| n.iter().any(|name| name == a.name))
}

fn resource_listed(rule: &Value, resource: &str, subresource: &str) -> bool {
    let items = rule["resources"].as_array().into_iter().flatten();
    items.filter_map(Value::as_str).any(|item| {
        let (r, sub) = item.split_once('/').unwrap_or((item, ""));
        let resource_ok = r == "*" || r == resource;
        let sub_ok = match (sub, subresource) {
            ("*", _) => true,
            (wanted, actual) => wanted == actual,
        };
        resource_ok && sub_ok
    })
}

/// `Cluster`, `Namespaced` or `*`; a request without a namespace is a
/// cluster-scoped one.
fn scope_covers(scope: &str, namespace: &str) -> bool {
    match scope {
        "Cluster" => namespace.is_empty(),
        "Namespaced" => !namespace.is_empty(),
        _ => true,
    }
}

fn selector(value: &Value) -> Result<LabelSelector, String> {
    LabelSelector::from_object(value).map_err(|e| e.to_string())
}

/// kube's rule: a namespaced request is matched by its namespace's
/// labels, a Namespace by its own, any other cluster-scoped object always.
fn namespace_selected(
    wanted: &Value,
    a: &Attributes<'_>,
    object: Option<&Value>,
    namespace: Option<&Value>,
) -> Result<bool, String> {
    let wanted = selector(wanted)?;
    if wanted.is_empty() {
        return Ok(true);
    }
    let labelled = match namespace {
        Some(ns) => Some(ns),
        None if a.group.is_empty() && a.resource == "namespaces" => object.or(a.old_object),
        None => return Ok(true),
    };
    Ok(wanted.matches(labelled.and_then(|o| o["metadata"]["labels"].as_object())))
}

/// The object or the old object has the labels asked for.
fn object_selected(
    wanted: &Value,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<bool, String> {
    let wanted = selector(wanted)?;
    if wanted.is_empty() {
        return Ok(true);
    }
    let labelled = [object, old].into_iter().flatten();
    Ok(labelled
        .map(|o| o["metadata"]["labels"].as_object())
        .any(|labels| wanted.matches(labels)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::plugins::testing::attributes;
    use crate::admission::Operation;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn deployments_create(user: &UserInfo) -> Attributes<'_> {
        let mut a = attributes(Operation::Create, "deployments", "ns", "d", user);
        a.group = "apps";
        a
    }

    #[test]
    fn rules_match_by_operation_group_version_and_resource() {
        let user = UserInfo::anonymous();
        let a = deployments_create(&user);
        let rule = |r: Value| json!({"resourceRules": [r]});
        let apps = json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]});
        assert_eq!(covers(&rule(apps.clone()), &a, None, None), Ok(true));
        let mut update_only = apps.clone();
        update_only["operations"] = json!(["UPDATE"]);
        assert_eq!(covers(&rule(update_only), &a, None, None), Ok(false));
        let any = json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]});
        assert_eq!(covers(&rule(any.clone()), &a, None, None), Ok(true));
        let mut scale = a;
        scale.subresource = "scale";
        assert_eq!(
            covers(&rule(any), &scale, None, None),
            Ok(false),
            "* is no subresource"
        );
        let scales = json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/scale"]});
        assert_eq!(covers(&rule(scales), &scale, None, None), Ok(true));
        let excluded = json!({"resourceRules": [apps.clone()], "excludeResourceRules": [apps]});
        assert_eq!(covers(&excluded, &a, None, None), Ok(false));
        let cluster = json!({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"], "scope": "Cluster"});
        assert_eq!(covers(&rule(cluster), &a, None, None), Ok(false));
    }

    #[test]
    fn selectors_pick_namespaces_and_objects() {
        let user = UserInfo::anonymous();
        let a = deployments_create(&user);
        let ns = json!({"metadata": {"name": "ns", "labels": {"env": "prod"}}});
        let object = json!({"metadata": {"labels": {"app": "web"}}});
        let by_ns = json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}});
        assert_eq!(covers(&by_ns, &a, Some(&object), Some(&ns)), Ok(true));
        let by_other_ns = json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}});
        assert_eq!(
            covers(&by_other_ns, &a, Some(&object), Some(&ns)),
            Ok(false)
        );
        let by_object = json!({"objectSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}});
        assert_eq!(covers(&by_object, &a, Some(&object), Some(&ns)), Ok(true));
        let bad =
            json!({"objectSelector": {"matchExpressions": [{"key": "app", "operator": "Nearly"}]}});
        assert!(covers(&bad, &a, Some(&object), Some(&ns)).is_err());
    }
}
