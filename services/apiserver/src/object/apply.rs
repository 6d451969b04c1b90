//! Server-side apply (structured-merge-diff semantics): the applied
//! configuration is merged into the live object, what the manager applied
//! before and leaves out now is removed unless someone else owns it, and
//! taking a field another manager owns with a different value is a
//! conflict unless forced.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::managed_fields::{
    compare, describe, item_element, restrict_to_part, strip_ignored, to_field_set, Entry,
    FieldSet, ListKind, Managed, Operation, Shape, Writer,
};
use super::time::now_rfc3339;
use crate::error::{ApiError, Cause};

pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// kubectl's own server-side apply manager, which Kubernetes lets take
/// over what client-side apply set (see [`allowed_by_last_applied`]).
const KUBECTL: &str = "kubectl";

/// One field another manager owns and the apply would change.
#[derive(Debug, Clone, PartialEq)]
struct Conflict {
    manager: String,
    path: Vec<String>,
}

/// Applies `config` to `live` (an object holding only apiVersion, kind
/// and name when there is none yet) for `writer`, returning the new
/// object with its managedFields.
pub fn apply(
    live: &Value,
    config: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, ApiError> {
    let managed = Managed::decode(live)
        .ok_or_else(|| ApiError::Internal("failed to decode managed fields".into()))?;
    let config = config_for_part(config, writer);
    let attempt = |force| merge_and_own(live, &config, &managed, writer, force);
    let shape = writer.shape;
    let mut merged = match attempt(force) {
        Ok(merged) => merged,
        // Fields client-side apply set to what is applied now are not
        // worth a conflict when kubectl moves to server-side apply.
        Err(conflicts)
            if writer.manager == KUBECTL && allowed_by_last_applied(live, &conflicts, shape) =>
        {
            attempt(true).map_err(|c| conflict_error(&c))?
        }
        Err(conflicts) => return Err(conflict_error(&conflicts)),
    };
    if writer.manager == KUBECTL {
        sync_last_applied(live, &config, &mut merged);
    }
    Ok(merged)
}

/// The typed round trip of a configuration (`typed`) limited to the
/// fields the configuration has (`raw`): values in canonical form, unknown
/// fields gone, and none of the defaults the typed decoding fills in for
/// required fields, which the applier did not set. An explicit null stays:
/// it asks for the field to be owned and unset.
pub fn restrict_to_typed(typed: &Value, raw: &Value) -> Value {
    match (typed, raw) {
        (Value::Object(t), Value::Object(r)) => Value::Object(
            r.iter()
                .filter_map(|(key, value)| match (t.get(key), value) {
                    (Some(typed), value) => Some((key.clone(), restrict_to_typed(typed, value))),
                    (None, Value::Null) => Some((key.clone(), Value::Null)),
                    (None, _) => None,
                })
                .collect(),
        ),
        (Value::Array(t), Value::Array(r)) if t.len() == r.len() => Value::Array(
            t.iter()
                .zip(r)
                .map(|(typed, raw)| restrict_to_typed(typed, raw))
                .collect(),
        ),
        _ => typed.clone(),
    }
}

/// What of the configuration the addressed part may change: `/status`
/// applies only status; the main resource of a type with a status
/// subresource ignores status.
fn config_for_part(config: &Value, writer: &Writer) -> Value {
    let mut config = config.clone();
    let Some(map) = config.as_object_mut() else {
        return config;
    };
    match writer.subresource {
        "status" => {
            map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
                metadata.retain(|k, _| k == "name" || k == "namespace");
            }
        }
        "" if writer.has_status => {
            map.remove("status");
        }
        _ => {}
    }
    config
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(metadata) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    obj
}

fn merge_and_own(
    live: &Value,
    config: &Value,
    managed: &Managed,
    writer: &Writer,
    force: bool,
) -> Result<Value, Vec<Conflict>> {
    let live = without_managed_fields(live);
    let shape = writer.shape;
    let applied = to_field_set(config, shape);
    let mut owned = applied.clone();
    strip_ignored(&mut owned);
    restrict_to_part(&mut owned, writer.subresource, writer.has_status);

    let mut managers = managed.clone();
    let me = |m: &Managed| m.position(writer.manager, Operation::Apply, writer.subresource);
    let last = me(&managers)
        .map(|i| managers.0[i].fields.clone())
        .unwrap_or_default();
    let entry = Entry {
        manager: writer.manager.to_string(),
        operation: Operation::Apply,
        api_version: writer.api_version.to_string(),
        time: Some(now_rfc3339()),
        subresource: writer.subresource.to_string(),
        fields: owned,
    };
    match me(&managers) {
        Some(i) => managers.0[i] = entry,
        None => managers.0.push(entry),
    }

    let mut merged = merge_value("", Some(&live), config, shape);
    let mut keep = managers.owned();
    keep.union(&applied);
    prune(&mut merged, "", &last, Some(&keep), true, shape);

    let comparison = compare(&live, &merged, shape);
    let changed = comparison.changed();
    let mine = me(&managers);
    let mut conflicts = Vec::new();
    for (i, entry) in managers.0.iter().enumerate() {
        if Some(i) == mine {
            continue;
        }
        for path in entry.fields.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: entry.label(),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        conflicts.sort_by(|a, b| (&a.manager, &a.path).cmp(&(&b.manager, &b.path)));
        return Err(conflicts);
    }
    for (i, entry) in managers.0.iter_mut().enumerate() {
        if Some(i) != mine {
            entry.fields = entry
                .fields
                .difference(&changed)
                .difference(&comparison.removed);
        }
    }
    managers.drop_empty();
    managers.encode_into(&mut merged);
    Ok(merged)
}

/// Merges `config` into `live`: maps field by field, keyed lists element
/// by element, sets by value; atomic values and scalars are replaced.
/// `shape` is the values' own.
fn merge_value(field: &str, live: Option<&Value>, config: &Value, shape: Shape) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if !shape.is_atomic_map(field) => {
            let mut out = l.clone();
            for (key, value) in c {
                let merged = merge_value(key, l.get(key), value, shape.member(key));
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) => merge_lists(field, l, c, shape),
        _ => config.clone(),
    }
}

/// Walks both lists as structured-merge-diff does: elements both have
/// are merged in the applied order, live elements the configuration does
/// not mention stay where they were, new ones come in where applied.
fn merge_lists(field: &str, live: &[Value], config: &[Value], shape: Shape) -> Value {
    let all: Vec<Value> = live.iter().chain(config).cloned().collect();
    let kind = shape.list_kind(field, &all);
    let items = shape.items();
    if kind == ListKind::Atomic {
        return Value::Array(config.to_vec());
    }
    let ids = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .enumerate()
            .map(|(i, item)| item_element(&kind, item, i))
            .collect()
    };
    let (live_ids, config_ids) = (ids(live), ids(config));
    // Indexed by element, so long lists cost their length, not its square.
    let mut live_at: HashMap<&String, usize> = HashMap::new();
    for (i, id) in live_ids.iter().enumerate() {
        live_at.entry(id).or_insert(i);
    }
    let configured: HashSet<&String> = config_ids.iter().collect();
    let live_of = |id: &String| live_at.get(id).map(|&i| &live[i]);
    let mut out = Vec::with_capacity(live.len() + config.len());
    let mut emitted = HashSet::new();
    let (mut l, mut r) = (0, 0);
    while l < live.len() || r < config.len() {
        if l < live.len() && r < config.len() && live_ids[l] == config_ids[r] {
            out.push(merge_value("", Some(&live[l]), &config[r], items));
            emitted.insert(&config_ids[r]);
            (l, r) = (l + 1, r + 1);
            continue;
        }
        if l < live.len() {
            if !configured.contains(&live_ids[l]) {
                out.push(live[l].clone());
                l += 1;
                continue;
            }
            if emitted.contains(&live_ids[l]) || r == config.len() {
                l += 1;
                continue;
            }
        }
        if r < config.len() {
            if emitted.insert(&config_ids[r]) {
                out.push(merge_value("", live_of(&config_ids[r]), &config[r], items));
            }
            r += 1;
        }
    }
    Value::Array(out)
}

/// Removes what the manager applied last time (`last`) that nobody owns
/// now (`keep`, which includes this apply). A struct field counts as
/// applied when anything under it was, as Kubernetes counts named
/// fields; `metadata` itself always stays.
fn prune(
    value: &mut Value,
    field: &str,
    last: &FieldSet,
    keep: Option<&FieldSet>,
    top: bool,
    shape: Shape,
) {
    if let Value::Array(items) = value {
        return prune_list(items, field, last, keep, shape);
    }
    let Value::Object(map) = value else {
        return;
    };
    for (element, last_child) in last.children() {
        let keep_child = keep.and_then(|k| k.child(element));
        let kept = keep_child.is_some_and(|k| !k.is_empty());
        let removable = last_child.is_member() || element.starts_with("f:");
        let Some(name) = element.strip_prefix("f:") else {
            continue;
        };
        if !kept && removable && !(top && element == "f:metadata") {
            map.remove(name);
            continue;
        }
        if let Some(child) = map.get_mut(name) {
            prune(
                child,
                name,
                last_child,
                keep_child,
                false,
                shape.member(name),
            );
        }
    }
}

/// [`prune`] for a list: its elements named once, then looked up by name
/// (a list and a field set of thousands of elements cost thousands, not
/// millions); every element with a removed name goes.
fn prune_list(
    items: &mut Vec<Value>,
    field: &str,
    last: &FieldSet,
    keep: Option<&FieldSet>,
    shape: Shape,
) {
    let kind = shape.list_kind(field, items);
    let names: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, item)| item_element(&kind, item, i))
        .collect();
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        first.entry(name.as_str()).or_insert(i);
    }
    let mut removed: HashSet<&str> = HashSet::new();
    for (element, last_child) in last.children() {
        let keep_child = keep.and_then(|k| k.child(element));
        let kept = keep_child.is_some_and(|k| !k.is_empty());
        if !kept && (last_child.is_member() || element.starts_with("f:")) {
            removed.insert(element.as_str());
        } else if let Some(&i) = first.get(element.as_str()) {
            prune(
                &mut items[i],
                "",
                last_child,
                keep_child,
                false,
                shape.items(),
            );
        }
    }
    if removed.is_empty() {
        return;
    }
    let mut i = 0;
    items.retain(|_| {
        i += 1;
        !removed.contains(names[i - 1].as_str())
    });
}

/// The fields kubectl's client-side apply recorded in the last-applied
/// annotation with the values they still have: conflicts on those are
/// allowed for kubectl's server-side apply (Kubernetes' lastAppliedManager).
fn allowed_by_last_applied(live: &Value, conflicts: &[Conflict], shape: Shape) -> bool {
    let Some(text) = live["metadata"]["annotations"][LAST_APPLIED].as_str() else {
        return false;
    };
    let Ok(last) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    if last["apiVersion"] != live["apiVersion"] {
        return false;
    }
    let differences = compare(&last, &without_managed_fields(live), shape);
    let allowed = to_field_set(&last, shape)
        .difference(&differences.modified)
        .difference(&differences.added)
        .difference(&differences.removed);
    conflicts.iter().all(|c| allowed.has(&c.path))
}

/// kubectl's server-side apply keeps an existing last-applied annotation
/// up to date, so a later client-side apply computes from it correctly.
fn sync_last_applied(live: &Value, config: &Value, merged: &mut Value) {
    if live["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .is_none()
    {
        return;
    }
    let mut last = config.clone();
    if let Some(annotations) = last
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            if let Some(metadata) = last["metadata"].as_object_mut() {
                metadata.remove("annotations");
            }
        }
    }
    let text = format!("{last}\n");
    let metadata = super::meta::metadata_mut(merged);
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(LAST_APPLIED.into(), text.into());
    }
}

/// 409 with one `FieldManagerConflict` cause per field, worded as
/// kube-apiserver words it.
fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|c| Cause {
            reason: "FieldManagerConflict",
            field: describe(&c.path),
            message: format!("conflict with {}", c.manager),
        })
        .collect();
    let message = match conflicts {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager,
            describe(&one.path)
        ),
        _ => {
            let mut lines = Vec::new();
            let mut current = None;
            for c in conflicts {
                if current != Some(&c.manager) {
                    lines.push(format!("conflicts with {}:", c.manager));
                    current = Some(&c.manager);
                }
                lines.push(format!("- {}", describe(&c.path)));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    ApiError::ApplyConflict(message, causes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::managed_fields::record_update;
    use serde_json::json;

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "apps/v1",
            subresource: "",
            has_status: true,
            shape: Shape::Builtin,
        }
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "app", "image": image, "ports": [{"containerPort": 80}]}]}}}})
    }

    #[test]
    fn merges_keyed_lists_and_keeps_unmentioned_fields() {
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "1", "imagePullPolicy": "Always"}, {"name": "b", "image": "2"}]}});
        let config = json!({"spec": {"containers": [{"name": "a", "image": "3"}, {"name": "c", "image": "4"}]}});
        let merged = merge_value("", Some(&live), &config, Shape::Builtin);
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "a", "image": "3", "imagePullPolicy": "Always"},
                   {"name": "b", "image": "2"}, {"name": "c", "image": "4"}])
        );
        // Atomic lists are replaced.
        let merged = merge_value(
            "",
            Some(&json!({"args": ["x", "y"]})),
            &json!({"args": ["z"]}),
            Shape::Builtin,
        );
        assert_eq!(merged["args"], json!(["z"]));
    }

    #[test]
    fn reapply_without_a_field_removes_it() {
        let live =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let first = apply(&live, &deployment(2, "nginx"), &writer("mgr"), false).unwrap();
        let mut config = deployment(2, "nginx");
        config["spec"].as_object_mut().unwrap().remove("replicas");
        let second = apply(&first, &config, &writer("mgr"), false).unwrap();
        assert!(second["spec"].get("replicas").is_none());
        assert_eq!(
            second["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        let entries = second["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["operation"], "Apply");
        assert!(entries[0]["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    }

    #[test]
    fn conflicts_with_an_update_manager_unless_forced() {
        let live =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let applied = apply(&live, &deployment(2, "nginx"), &writer("mgr"), false).unwrap();
        let mut scaled = applied.clone();
        scaled["spec"]["replicas"] = 5.into();
        let scaler = Writer {
            subresource: "scale",
            ..writer("kubectl")
        };
        record_update(&applied, &mut scaled, &scaler);
        let err = apply(&scaled, &deployment(2, "nginx"), &writer("mgr"), false).unwrap_err();
        assert_eq!(err.code(), 409);
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas"
        );
        assert_eq!(
            err.status()["details"]["causes"][0]["field"],
            ".spec.replicas"
        );
        // The same value is shared ownership, not a conflict.
        let shared = apply(&scaled, &deployment(5, "nginx"), &writer("mgr"), false).unwrap();
        assert_eq!(
            shared["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        // Forced, the applier takes the field and the scaler's entry goes.
        let forced = apply(&scaled, &deployment(2, "nginx"), &writer("mgr"), true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 2);
        assert_eq!(
            forced["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_field_another_manager_owns_is_not_pruned() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data});
        let w = |m| Writer {
            manager: m,
            api_version: "v1",
            subresource: "",
            has_status: false,
            shape: Shape::Builtin,
        };
        let one = apply(&live, &cm(json!({"a": "1", "b": "2"})), &w("x"), false).unwrap();
        let two = apply(&one, &cm(json!({"b": "2"})), &w("y"), false).unwrap();
        let three = apply(&two, &cm(json!({})), &w("x"), false).unwrap();
        assert_eq!(three["data"], json!({"b": "2"}));
    }

    #[test]
    fn kubectl_takes_over_client_side_apply_fields() {
        let last = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web"},"spec":{"replicas":2}}"#;
        let mut live = deployment(2, "nginx");
        live["metadata"]["annotations"] = json!({ LAST_APPLIED: last });
        let mut created = live.clone();
        record_update(
            &json!({}),
            &mut created,
            &writer("kubectl-client-side-apply"),
        );
        let applied = apply(&created, &deployment(3, "nginx"), &writer("kubectl"), false).unwrap();
        assert_eq!(applied["spec"]["replicas"], 3);
        let annotation = applied["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .unwrap();
        assert!(annotation.contains("\"replicas\":3"));
        // Another manager gets the conflict.
        assert_eq!(
            apply(&created, &deployment(3, "nginx"), &writer("other"), false)
                .unwrap_err()
                .code(),
            409
        );
    }
}
