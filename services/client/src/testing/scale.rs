//! The `scale` subresource of any stored object with `spec.replicas`
//! (Deployments, ReplicaSets, StatefulSets, ReplicationControllers, custom
//! resources shaped alike), as kube's scale subresources answer it: an
//! `autoscaling/v1` Scale with the replicas asked for, those there, and
//! the pod selector as text; a PUT or PATCH of the Scale sets
//! `spec.replicas` (Conflict on a stale resourceVersion).

use serde_json::{json, Value};

use super::objects::{key, ChangeType, Objects};
use super::patch;
use super::request::{ApiRequest, Verb};
use super::status::ApiError;
use super::writes::{collection, Written};

fn stored(objects: &Objects, request: &ApiRequest) -> Result<Value, ApiError> {
    let name = request.name.clone().unwrap_or_default();
    let found = objects.get(
        &collection(request),
        &key(request.namespace.as_deref(), &name),
    );
    found
        .cloned()
        .ok_or_else(|| ApiError::not_found(&request.qualified_resource(), &name))
}

/// A label selector (a map, or matchLabels and matchExpressions) as text.
fn selector_text(selector: &Value) -> String {
    let labels = selector.get("matchLabels").unwrap_or(selector);
    let mut parts: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "matchExpressions" && *k != "matchLabels")
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    parts.join(",")
}

fn scale_of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector = match &object["status"]["selector"] {
        Value::String(text) => text.clone(),
        _ => selector_text(&object["spec"]["selector"]),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

/// GET .../{name}/scale.
pub(super) fn get(objects: &Objects, request: &ApiRequest) -> Result<(u16, Value), ApiError> {
    Ok((200, scale_of(&stored(objects, request)?)))
}

/// PUT or PATCH .../{name}/scale: the new Scale's replicas become the object's.
pub(super) fn write(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let mut object = stored(objects, request)?;
    let mut scale = scale_of(&object);
    let sent: Value = match request.verb == Verb::Patch {
        true => {
            patch::apply(&mut scale, &request.content_type, body)?;
            scale
        }
        false => serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?,
    };
    let name = request.name.clone().unwrap_or_default();
    let version = sent["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    if !version.is_empty() && Some(version) != object["metadata"]["resourceVersion"].as_str() {
        return Err(ApiError::modified(&request.qualified_resource(), &name));
    }
    let Some(replicas) = sent["spec"]["replicas"].as_i64().filter(|r| *r >= 0) else {
        return Err(ApiError::bad_request(
            "spec.replicas: Invalid value: must be a non-negative number",
        ));
    };
    if object["spec"]["replicas"].as_i64() == Some(replicas) {
        return Ok((200, scale_of(&object), Vec::new()));
    }
    object["spec"]["replicas"] = json!(replicas);
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
    object["metadata"]["generation"] = json!(generation);
    let key = key(request.namespace.as_deref(), &name);
    let change = objects.put(&collection(request), &key, object, ChangeType::Modified);
    Ok((200, scale_of(&change.object), vec![change]))
}
