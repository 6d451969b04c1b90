//! PATCH bodies: JSON merge patch and JSON patch through the json-patch
//! crate, and a strategic merge patch good for the shapes controllers
//! send (lists merged by kube's merge keys, `$patch` directives,
//! `finalizers` as a set). Server-side apply is taken as a merge of the
//! applied object (no field ownership).

use serde_json::{Map, Value};

use super::status::ApiError;

/// Applies a PATCH body of `content_type` to `target`.
pub(super) fn apply(target: &mut Value, content_type: &str, body: &[u8]) -> Result<(), ApiError> {
    let kind = content_type.split(';').next().unwrap_or_default().trim();
    let parse = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
    };
    match kind {
        "application/merge-patch+json" | "application/apply-patch+yaml" => {
            json_patch::merge(target, &parse()?);
            Ok(())
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch = serde_json::from_value(parse()?)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(target, &patch)
                .map_err(|e| ApiError::invalid(format!("the server rejected our request due to an error in our request: {e}")))
        }
        "application/strategic-merge-patch+json" => {
            strategic_merge(target, &parse()?);
            Ok(())
        }
        other => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {other:?}"),
        )),
    }
}

/// The key that identifies elements of a list field, as kube's types
/// declare with `patchMergeKey`.
fn merge_key(field: &str, elements: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        "taints" => "key",
        "hostAliases" => "ip",
        // Container ports are keyed by containerPort, a Service's by port.
        "ports" if elements.iter().any(|e| e.get("containerPort").is_some()) => "containerPort",
        "ports" => "port",
        _ => return None,
    })
}

/// Lists of strings merged as sets.
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// kube's strategic merge for the common cases.
pub(super) fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        *target = Value::Object(replaced);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (target.get_mut(field), value) {
                list.retain(|v| !gone.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue; // $setElementOrder, $retainKeys: ordering hints
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(_) => {
                strategic_merge(target.entry(key.clone()).or_insert(Value::Null), value)
            }
            Value::Array(items) => merge_list(target, key, items),
            _ => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_list(target: &mut Map<String, Value>, field: &str, items: &[Value]) {
    let existing = match target.get_mut(field) {
        Some(Value::Array(existing)) => existing,
        _ => {
            let cleaned = items
                .iter()
                .filter(|i| !is_delete_directive(i))
                .cloned()
                .collect();
            target.insert(field.to_string(), Value::Array(cleaned));
            return;
        }
    };
    if is_set_list(field) {
        for item in items {
            if !existing.contains(item) {
                existing.push(item.clone());
            }
        }
        return;
    }
    let Some(key) = merge_key(field, items).filter(|_| items.iter().all(Value::is_object)) else {
        *existing = items.to_vec();
        return;
    };
    for item in items {
        let id = &item[key];
        let position = existing.iter().position(|e| &e[key] == id);
        match (position, is_delete_directive(item)) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut existing[i], item),
            (None, false) => existing.push(item.clone()),
        }
    }
}

fn is_delete_directive(item: &Value) -> bool {
    item.get("$patch").and_then(Value::as_str) == Some("delete")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_finalizers_as_a_set() {
        let mut pod = json!({
            "metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}},
            "spec": {"containers": [{"name": "app", "image": "v1"}, {"name": "side", "image": "s"}]},
        });
        let patch = json!({
            "metadata": {"finalizers": ["b"], "labels": {"y": null}},
            "spec": {"containers": [{"name": "app", "image": "v2"}, {"name": "side", "$patch": "delete"}]},
        });
        strategic_merge(&mut pod, &patch);
        assert_eq!(pod["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(pod["metadata"]["labels"], json!({"x": "1"}));
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "app", "image": "v2"}])
        );
    }

    #[test]
    fn conditions_merge_by_type() {
        let mut status = json!({"conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}]});
        strategic_merge(
            &mut status,
            &json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        );
        assert_eq!(
            status["conditions"][0],
            json!({"type": "Ready", "status": "True"})
        );
        assert_eq!(status["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn replace_directive_and_plain_lists() {
        let mut obj = json!({"spec": {"template": {"a": 1, "b": 2}, "args": ["x", "y"]}});
        strategic_merge(
            &mut obj,
            &json!({"spec": {"template": {"$patch": "replace", "c": 3}, "args": ["z"]}}),
        );
        assert_eq!(obj, json!({"spec": {"template": {"c": 3}, "args": ["z"]}}));
    }

    #[test]
    fn merge_and_json_patches_and_unknown_types() {
        let mut obj = json!({"a": {"b": 1, "c": 2}});
        apply(
            &mut obj,
            "application/merge-patch+json",
            br#"{"a": {"c": null, "d": 4}}"#,
        )
        .unwrap();
        assert_eq!(obj, json!({"a": {"b": 1, "d": 4}}));
        apply(
            &mut obj,
            "application/json-patch+json",
            br#"[{"op": "replace", "path": "/a/b", "value": 9}]"#,
        )
        .unwrap();
        assert_eq!(obj["a"]["b"], 9);
        let failed = apply(
            &mut obj,
            "application/json-patch+json",
            br#"[{"op": "test", "path": "/a/b", "value": 1}]"#,
        );
        assert_eq!(failed.unwrap_err().code, 422);
        assert_eq!(apply(&mut obj, "text/plain", b"").unwrap_err().code, 415);
        assert_eq!(
            apply(&mut obj, "application/merge-patch+json", b"{")
                .unwrap_err()
                .code,
            400
        );
    }
}
