//! A binding's parameters: the objects of the policy's `paramKind` its
//! `paramRef` names (by name, or by label selector in a namespace), as
//! kube's `CollectParams` finds them. Each is one evaluation of the
//! policy with `params` set; none found is what
//! `parameterNotFoundAction` says (Allow: nothing to check, Deny: a
//! configuration error, so the failure policy decides).

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects};
use crate::object::selector::LabelSelector;

/// Why a binding's parameters cannot be used (kube's messages; the
/// plugin prefixes `failed to configure binding: `).
pub type ParamError = String;

/// The `params` values to evaluate the policy with: `[null]` when the
/// policy takes none or the binding gives none.
pub async fn collect(
    objects: &dyn Objects,
    policy_spec: &Value,
    binding_spec: &Value,
    request_namespace: &str,
) -> Result<Vec<Value>, ParamError> {
    let kind = &policy_spec["paramKind"];
    let reference = &binding_spec["paramRef"];
    if !kind.is_object() || !reference.is_object() {
        return Ok(vec![Value::Null]);
    }
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_string();
    let (api_version, kind) = (text(kind, "apiVersion"), text(kind, "kind"));
    let served = objects
        .served_kind(&api_version, &kind)
        .ok_or_else(|| format!("paramKind kind `{api_version}, Kind={kind}` not known"))?;
    let asked_namespace = text(reference, "namespace");
    let namespace = match (served.namespaced, asked_namespace.as_str()) {
        (true, "") if request_namespace.is_empty() => {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches \
                 cluster-scoped resources"
                    .into(),
            )
        }
        (true, "") => request_namespace.to_string(),
        (true, ns) => ns.to_string(),
        (false, "") => String::new(),
        (false, _) => {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            )
        }
    };
    let cached = Freshness::Cached;
    let name = text(reference, "name");
    let found = if !name.is_empty() {
        let one = objects
            .get(served.resource, &namespace, &name, cached)
            .await;
        one.map_err(|e| e.to_string())?.into_iter().collect()
    } else {
        let selector = LabelSelector::from_object(&reference["selector"])
            .map_err(|e| format!("invalid paramRef.selector: {e}"))?;
        let all = objects.list(served.resource, &namespace, cached).await;
        let all = all.map_err(|e| e.to_string())?;
        all.into_iter()
            .filter(|o| selector.matches(o["metadata"]["labels"].as_object()))
            .collect()
    };
    let found: Vec<Value> = found;
    if found.is_empty() && reference["parameterNotFoundAction"] == "Deny" {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::plugins::testing::{Memory, CONFIG_MAPS};
    use serde_json::json;

    fn memory() -> Memory {
        let memory = Memory::default();
        for (ns, name, tier) in [
            ("a", "one", "gold"),
            ("a", "two", "gold"),
            ("b", "three", "x"),
        ] {
            memory.put(
                CONFIG_MAPS,
                json!({"metadata": {"namespace": ns, "name": name, "labels": {"tier": tier}}}),
            );
        }
        memory
    }

    fn names(found: Vec<Value>) -> Vec<String> {
        found
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("null").to_string())
            .collect()
    }

    #[tokio::test]
    async fn params_by_name_selector_and_namespace() {
        let memory = memory();
        let policy = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
        let by_name = json!({"paramRef": {"name": "one", "parameterNotFoundAction": "Deny"}});
        let found = collect(&memory, &policy, &by_name, "a").await.unwrap();
        assert_eq!(names(found), ["one"]);
        let elsewhere = json!({"paramRef": {"name": "three", "namespace": "b",
            "parameterNotFoundAction": "Deny"}});
        let found = collect(&memory, &policy, &elsewhere, "a").await.unwrap();
        assert_eq!(names(found), ["three"]);
        let selected = json!({"paramRef": {"selector": {"matchLabels": {"tier": "gold"}},
            "parameterNotFoundAction": "Allow"}});
        let found = collect(&memory, &policy, &selected, "a").await.unwrap();
        assert_eq!(names(found), ["one", "two"]);
        let found = collect(&memory, &policy, &selected, "b").await.unwrap();
        assert!(found.is_empty(), "Allow: nothing to evaluate");
        let none = collect(&memory, &policy, &json!({}), "a").await.unwrap();
        assert_eq!(none, [Value::Null], "no paramRef: params is null");
    }

    #[tokio::test]
    async fn missing_params_and_bad_references_are_errors() {
        let memory = memory();
        let policy = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
        let missing = json!({"paramRef": {"name": "nope", "parameterNotFoundAction": "Deny"}});
        assert_eq!(
            collect(&memory, &policy, &missing, "a").await,
            Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
        );
        let cluster = collect(&memory, &policy, &missing, "").await.unwrap_err();
        assert!(
            cluster.starts_with("cannot use namespaced paramRef"),
            "{cluster}"
        );
        let unknown = json!({"paramKind": {"apiVersion": "v9", "kind": "Nothing"}});
        assert_eq!(
            collect(&memory, &unknown, &missing, "a").await,
            Err("paramKind kind `v9, Kind=Nothing` not known".into())
        );
    }
}
