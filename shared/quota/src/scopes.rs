//! Which objects a ResourceQuota with scopes counts (kube's quota scope
//! matching): `spec.scopes` and `spec.scopeSelector.matchExpressions`
//! must all hold for an object to count. Every scope is about pods, so a
//! scoped quota counts no other kind. Shared by the `ResourceQuota`
//! plugin and the controller that recounts `status.used`.

use serde_json::Value;

/// Whether `quota` counts `object` of `group`/`resource`.
pub fn counts(quota: &Value, group: &str, resource: &str, object: &Value) -> bool {
    let spec = &quota["spec"];
    let listed = spec["scopes"].as_array().into_iter().flatten();
    let selected = spec["scopeSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten();
    let mut requirements = listed
        .filter_map(Value::as_str)
        .map(|scope| (scope, "Exists", &[][..]))
        .chain(selected.map(|e| {
            let values = e["values"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            (
                e["scopeName"].as_str().unwrap_or(""),
                e["operator"].as_str().unwrap_or(""),
                values,
            )
        }))
        .peekable();
    if requirements.peek().is_none() {
        return true;
    }
    let pod = group.is_empty() && resource == "pods";
    pod && requirements.all(|(scope, operator, values)| holds(scope, operator, values, object))
}

/// One requirement on a pod. `Exists` on a scope means the pod is in it;
/// `In`/`NotIn` take values only for PriorityClass.
fn holds(scope: &str, operator: &str, values: &[Value], pod: &Value) -> bool {
    let spec = &pod["spec"];
    let in_scope = match scope {
        "Terminating" => spec["activeDeadlineSeconds"]
            .as_i64()
            .is_some_and(|s| s >= 0),
        "NotTerminating" => spec["activeDeadlineSeconds"].as_i64().is_none_or(|s| s < 0),
        "BestEffort" => best_effort(spec),
        "NotBestEffort" => !best_effort(spec),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(spec),
        "PriorityClass" => {
            let class = spec["priorityClassName"].as_str().unwrap_or("");
            let named = values.iter().any(|v| v.as_str() == Some(class));
            return match operator {
                "In" => named,
                "NotIn" => !named,
                "Exists" => true,
                "DoesNotExist" => class.is_empty(),
                _ => false,
            };
        }
        _ => false,
    };
    match operator {
        "Exists" => in_scope,
        "DoesNotExist" => !in_scope,
        _ => false,
    }
}

/// No container asks for or is limited to any resource.
fn best_effort(spec: &Value) -> bool {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|field| spec[*field].as_array().into_iter().flatten())
        .all(|c| {
            let empty = |v: &Value| v.as_object().is_none_or(|m| m.is_empty());
            empty(&c["resources"]["requests"]) && empty(&c["resources"]["limits"])
        })
}

/// An affinity term of the pod names namespaces or a namespace selector.
fn cross_namespace_affinity(spec: &Value) -> bool {
    let affinity = &spec["affinity"];
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let hard = &affinity[*kind]["requiredDuringSchedulingIgnoredDuringExecution"];
        let soft = &affinity[*kind]["preferredDuringSchedulingIgnoredDuringExecution"];
        let hard_terms = hard.as_array().into_iter().flatten();
        let soft_terms = soft
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| &w["podAffinityTerm"]);
        hard_terms.chain(soft_terms).any(|term| {
            term["namespaces"].as_array().is_some_and(|n| !n.is_empty())
                || term["namespaceSelector"].is_object()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(spec: Value) -> Value {
        json!({"spec": spec})
    }

    #[test]
    fn scopes_pick_pods_by_deadline_resources_and_priority() {
        let plain = json!({"spec": {"containers": [{"name": "a"}]}});
        let deadline =
            json!({"spec": {"activeDeadlineSeconds": 30, "containers": [{"name": "a"}]}});
        let sized = json!({"spec": {"priorityClassName": "high", "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}}]}});
        let pod = |q: &Value, o: &Value| counts(q, "", "pods", o);
        let terminating = quota(json!({"scopes": ["Terminating"]}));
        assert!(pod(&terminating, &deadline) && !pod(&terminating, &plain));
        let best_effort = quota(json!({"scopes": ["BestEffort", "NotTerminating"]}));
        assert!(pod(&best_effort, &plain));
        assert!(!pod(&best_effort, &deadline), "every scope must hold");
        assert!(!pod(&best_effort, &sized));
        let high = quota(json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}));
        assert!(pod(&high, &sized) && !pod(&high, &plain));
        let unclassed = quota(json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}));
        assert!(pod(&unclassed, &plain) && !pod(&unclassed, &sized));
        let not_best = quota(json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "BestEffort", "operator": "DoesNotExist"}]}}));
        assert!(pod(&not_best, &sized) && !pod(&not_best, &plain));
    }

    #[test]
    fn a_scoped_quota_counts_only_pods_and_an_unscoped_one_counts_all() {
        let configmap = json!({"data": {}});
        assert!(!counts(
            &quota(json!({"scopes": ["NotTerminating"]})),
            "",
            "configmaps",
            &configmap
        ));
        assert!(counts(
            &quota(json!({"hard": {"pods": "1"}})),
            "",
            "configmaps",
            &configmap
        ));
        let affinity = json!({"spec": {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"namespaces": ["other"], "topologyKey": "k"}]}}}});
        let cross = quota(json!({"scopes": ["CrossNamespacePodAffinity"]}));
        assert!(counts(&cross, "", "pods", &affinity));
        assert!(!counts(&cross, "", "pods", &json!({"spec": {}})));
    }
}
