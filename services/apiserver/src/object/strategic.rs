//! Strategic merge patch for built-in types: a JSON merge patch where
//! lists of objects merge by their key field (containers by `name`, ports
//! by `containerPort` or `port`, ...) and `$`-directives steer the merge:
//! `$patch: replace|delete`, `$setElementOrder/<list>`,
//! `$deleteFromPrimitiveList/<list>`, `$retainKeys`. This covers what
//! kubectl's client-side apply, `edit` and `patch` send.

use serde_json::{Map, Value};

const ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList/";

/// The merge key of a list field, as the Kubernetes types declare them
/// (`patchMergeKey`); lists without one are replaced wholesale.
pub(crate) fn merge_key(field: &str, sample: &[Value]) -> Option<&'static str> {
    let has = |key: &str| sample.iter().any(|item| item.get(key).is_some());
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates"
            if !has("conditionType") =>
        {
            Some("name")
        }
        "readinessGates" => Some("conditionType"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" => Some("port"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        _ => None,
    }
}

/// Lists of scalars Kubernetes merges as sets (`patchStrategy: merge`).
fn is_merged_scalar_list(field: &str) -> bool {
    field == "finalizers"
}

pub fn merge(original: &Value, patch: &Value) -> Value {
    match (original, patch) {
        (Value::Object(orig), Value::Object(p)) => Value::Object(merge_maps(orig, p)),
        _ => strip_directives(patch),
    }
}

fn merge_maps(orig: &Map<String, Value>, patch: &Map<String, Value>) -> Map<String, Value> {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        return strip_map(patch);
    }
    let mut out = orig.clone();
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        out.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (key, value) in patch {
        if let Some(list) = key.strip_prefix(DELETE_PRIMITIVE_PREFIX) {
            remove_primitives(&mut out, list, value);
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                out.remove(key);
            }
            Value::Object(p) if p.get("$patch").and_then(Value::as_str) == Some("delete") => {
                out.remove(key);
            }
            Value::Object(p) => {
                let merged = match out.get(key) {
                    Some(Value::Object(o)) => merge_maps(o, p),
                    _ => strip_map(p),
                };
                out.insert(key.clone(), Value::Object(merged));
            }
            Value::Array(items) => {
                let existing = out
                    .get(key)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let order = patch
                    .get(&format!("{ORDER_PREFIX}{key}"))
                    .and_then(Value::as_array);
                out.insert(
                    key.clone(),
                    Value::Array(merge_list(key, &existing, items, order)),
                );
            }
            scalar => {
                out.insert(key.clone(), scalar.clone());
            }
        }
    }
    // `$setElementOrder` for a list the patch did not touch still orders it.
    for (key, value) in patch {
        if let (Some(list), Value::Array(order)) = (key.strip_prefix(ORDER_PREFIX), value) {
            if !patch.contains_key(list) {
                if let Some(Value::Array(existing)) = out.get(list) {
                    let reordered = reorder(list, existing.clone(), order);
                    out.insert(list.to_string(), Value::Array(reordered));
                }
            }
        }
    }
    out
}

fn merge_list(
    field: &str,
    existing: &[Value],
    patch: &[Value],
    order: Option<&Vec<Value>>,
) -> Vec<Value> {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return patch
            .iter()
            .filter(|p| p.get("$patch").is_none())
            .map(strip_directives)
            .collect();
    }
    if is_merged_scalar_list(field) {
        let mut out = existing.to_vec();
        out.extend(patch.iter().filter(|p| !existing.contains(p)).cloned());
        return out;
    }
    let Some(key) = merge_key(field, patch).filter(|_| patch.iter().all(Value::is_object)) else {
        return patch.iter().map(strip_directives).collect();
    };
    let mut out: Vec<Value> = existing.to_vec();
    for item in patch {
        let id = item.get(key);
        let position = out.iter().position(|e| e.get(key) == id);
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = merge(&out[i], item),
            (None, false) => out.push(strip_directives(item)),
        }
    }
    match order {
        Some(order) => reorder(field, out, order),
        None => out,
    }
}

/// Puts items in the order `$setElementOrder` gives; items it does not
/// mention keep their relative order after the ones it does.
fn reorder(field: &str, items: Vec<Value>, order: &[Value]) -> Vec<Value> {
    let Some(key) = merge_key(field, order) else {
        return items;
    };
    let rank = |item: &Value| {
        order
            .iter()
            .position(|o| o.get(key) == item.get(key))
            .unwrap_or(usize::MAX)
    };
    let mut items = items;
    items.sort_by_key(rank);
    items
}

fn remove_primitives(out: &mut Map<String, Value>, list: &str, remove: &Value) {
    if let (Some(Value::Array(items)), Value::Array(remove)) = (out.get_mut(list), remove) {
        items.retain(|item| !remove.contains(item));
    }
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_map(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// A patch value that lands where nothing was: directives removed, and
/// nulls dropped (a null can only mean "delete", and there is nothing).
fn strip_map(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
        .map(|(k, v)| (k.clone(), strip_directives(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubectl_apply_patch_merges_containers_by_name() {
        let orig = json!({"metadata": {"labels": {"app": "demo", "tier": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent"},
                                    {"name": "side", "image": "busybox"}]}});
        let patch = json!({"metadata": {"labels": {"tier": null}},
            "spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                     "containers": [{"image": "nginx:1.27", "name": "app"}]}});
        let out = merge(&orig, &patch);
        assert_eq!(out["metadata"]["labels"], json!({"app": "demo"}));
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers[0]["name"], "side");
        assert_eq!(containers[1]["image"], "nginx:1.27");
        assert_eq!(containers[1]["imagePullPolicy"], "IfNotPresent");
        assert!(out["spec"].get("$setElementOrder/containers").is_none());
    }

    #[test]
    fn delete_directive_and_replace() {
        let orig = json!({"ports": [{"port": 80, "name": "http"}, {"port": 443}]});
        let out = merge(&orig, &json!({"ports": [{"port": 80, "$patch": "delete"}]}));
        assert_eq!(out, json!({"ports": [{"port": 443}]}));
        let out = merge(
            &orig,
            &json!({"ports": [{"port": 1}, {"$patch": "replace"}]}),
        );
        assert_eq!(out, json!({"ports": [{"port": 1}]}));
    }

    #[test]
    fn lists_without_key_are_replaced() {
        let orig = json!({"args": ["a", "b"]});
        assert_eq!(
            merge(&orig, &json!({"args": ["c"]})),
            json!({"args": ["c"]})
        );
    }
}
