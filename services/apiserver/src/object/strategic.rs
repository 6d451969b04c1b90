//! Strategic merge patch for built-in types: a JSON merge patch where
//! lists of objects merge by their key field (containers by `name`, ports
//! by `containerPort` or `port`, ...) and `$`-directives steer the merge:
//! `$patch: replace|delete`, `$setElementOrder/<list>`,
//! `$deleteFromPrimitiveList/<list>`, `$retainKeys`. This covers what
//! kubectl's client-side apply, `edit` and `patch` send.

use std::collections::{HashMap, HashSet, VecDeque};

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
        let present: HashSet<String> = existing.iter().map(Value::to_string).collect();
        let mut out = existing.to_vec();
        out.extend(
            patch
                .iter()
                .filter(|p| !present.contains(&p.to_string()))
                .cloned(),
        );
        return out;
    }
    let Some(key) = merge_key(field, patch).filter(|_| patch.iter().all(Value::is_object)) else {
        return patch.iter().map(strip_directives).collect();
    };
    let out = merge_keyed(existing, patch, key);
    match order {
        Some(order) => reorder(field, out, order),
        None => out,
    }
}

/// An element's merge key as a hashable text (JSON, with sorted object
/// keys: equal values give equal texts); elements without it share one.
fn key_of(item: &Value, key: &str) -> Option<String> {
    item.get(key).map(Value::to_string)
}

/// Merges `patch` into `existing` by `key`, each patch element into the
/// first live element with its key: indexed by key, so a long list costs
/// its length, not its length times the patch's.
fn merge_keyed(existing: &[Value], patch: &[Value], key: &str) -> Vec<Value> {
    let mut out: Vec<Option<Value>> = existing.iter().cloned().map(Some).collect();
    let mut at: HashMap<Option<String>, VecDeque<usize>> = HashMap::new();
    for (i, item) in existing.iter().enumerate() {
        at.entry(key_of(item, key)).or_default().push_back(i);
    }
    for item in patch {
        let id = key_of(item, key);
        let first = at.get(&id).and_then(|found| found.front().copied());
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (first, delete) {
            (Some(i), true) => {
                out[i] = None;
                at.entry(id).or_default().pop_front();
            }
            (None, true) => {}
            (Some(i), false) => out[i] = out[i].as_ref().map(|old| merge(old, item)),
            (None, false) => {
                at.entry(id).or_default().push_back(out.len());
                out.push(Some(strip_directives(item)));
            }
        }
    }
    out.into_iter().flatten().collect()
}

/// Puts items in the order `$setElementOrder` gives; items it does not
/// mention keep their relative order after the ones it does.
fn reorder(field: &str, items: Vec<Value>, order: &[Value]) -> Vec<Value> {
    let Some(key) = merge_key(field, order) else {
        return items;
    };
    let mut ranks: HashMap<Option<String>, usize> = HashMap::new();
    for (rank, o) in order.iter().enumerate() {
        ranks.entry(key_of(o, key)).or_insert(rank);
    }
    let rank = |item: &Value| ranks.get(&key_of(item, key)).copied().unwrap_or(usize::MAX);
    let mut items = items;
    items.sort_by_cached_key(rank);
    items
}

fn remove_primitives(out: &mut Map<String, Value>, list: &str, remove: &Value) {
    if let (Some(Value::Array(items)), Value::Array(remove)) = (out.get_mut(list), remove) {
        let remove: HashSet<String> = remove.iter().map(Value::to_string).collect();
        items.retain(|item| !remove.contains(&item.to_string()));
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

    #[test]
    fn keyed_merges_take_the_first_live_element_with_the_key() {
        let orig =
            json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}, {"port": 90}]});
        let patch = json!({"ports": [
            {"port": 80, "$patch": "delete"}, {"port": 80, "protocol": "UDP"},
            {"port": 91}, {"port": 91, "name": "again"}]});
        let out = merge(&orig, &patch);
        assert_eq!(
            out["ports"],
            json!([{"port": 80, "name": "b", "protocol": "UDP"}, {"port": 90},
                   {"port": 91, "name": "again"}])
        );
    }

    /// Lists of tens of thousands merge by index, not by scanning the
    /// list for every patch element.
    #[test]
    fn long_lists_merge() {
        let n = 20_000;
        let names = |from: usize| -> Vec<Value> {
            (from..from + n)
                .map(|i| json!({"name": format!("c{i}")}))
                .collect()
        };
        let orig = json!({"containers": names(0), "finalizers": (0..n).map(|i| format!("f{i}")).collect::<Vec<_>>()});
        let patch = json!({"containers": names(n / 2),
            "finalizers": (n / 2..n + n / 2).map(|i| format!("f{i}")).collect::<Vec<_>>(),
            "$setElementOrder/containers": names(n / 2)});
        let out = merge(&orig, &patch);
        assert_eq!(out["containers"].as_array().unwrap().len(), n + n / 2);
        assert_eq!(out["containers"][0]["name"], format!("c{}", n / 2));
        assert_eq!(out["finalizers"].as_array().unwrap().len(), n + n / 2);
    }
}
