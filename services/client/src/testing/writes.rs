//! The in-memory API's write rules, kube's for every type: create
//! (generateName, uid, creationTimestamp, generation, AlreadyExists),
//! update and patch (Conflict on a stale resourceVersion, status only
//! through `/status`, generation bumped when the spec changes, a no-op
//! writes nothing), delete (finalizers, pods' graceful deletion,
//! preconditions), and pods' `binding` and `eviction`.

use std::sync::Arc;

use k8s_openapi::chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

use super::objects::{key, Change, ChangeType, Collection, Objects};
use super::patch;
use super::request::ApiRequest;
use super::status::ApiError;

/// A write's answer: the status code, the body, the changes made.
pub(super) type Written = Result<(u16, Value, Vec<Arc<Change>>), ApiError>;

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Characters kube's name generator draws from (no vowels, no confusables).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated_name(prefix: &str) -> String {
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rand::random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

pub(super) fn collection(request: &ApiRequest) -> Collection {
    (request.group.clone(), request.resource.clone())
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding the body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the body is not a JSON object"));
    }
    Ok(value)
}

/// POST to a collection.
pub(super) fn create(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let mut object = parse_body(body)?;
    let meta = &mut object["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    match (&request.namespace, meta["namespace"].as_str()) {
        (Some(url), Some(body)) if !body.is_empty() && body != url => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ))
        }
        (Some(url), _) => meta["namespace"] = Value::String(url.clone()),
        (None, _) => {
            meta.as_object_mut().map(|m| m.remove("namespace"));
        }
    }
    let name = match (meta["name"].as_str(), meta["generateName"].as_str()) {
        (Some(name), _) if !name.is_empty() => name.to_string(),
        (_, Some(prefix)) if !prefix.is_empty() => generated_name(prefix),
        _ => {
            return Err(ApiError::invalid(format!(
            "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
            request.qualified_resource()
        )))
        }
    };
    let collection = collection(request);
    let key = key(request.namespace.as_deref(), &name);
    if objects.get(&collection, &key).is_some() {
        return Err(ApiError::already_exists(
            &request.qualified_resource(),
            &name,
        ));
    }
    meta["name"] = Value::String(name);
    meta["uid"] = Value::String(uuid::Uuid::new_v4().to_string());
    meta["creationTimestamp"] = Value::String(now());
    meta["generation"] = json!(1);
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        meta.as_object_mut().map(|m| m.remove(field));
    }
    // Status is written through the status subresource, as kube does.
    object.as_object_mut().map(|o| o.remove("status"));
    let change = objects.put(&collection, &key, object, ChangeType::Added);
    Ok((201, change.object.clone(), vec![change]))
}

/// PUT of an object or its status.
pub(super) fn update(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let object = parse_body(body)?;
    write_over(objects, request, object, true)
}

/// PATCH of an object or its status.
pub(super) fn patch(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let name = request.name.clone().unwrap_or_default();
    let current = objects
        .get(
            &collection(request),
            &key(request.namespace.as_deref(), &name),
        )
        .cloned();
    let Some(mut patched) = current.clone() else {
        // Server-side apply creates what is missing.
        if request.content_type.starts_with("application/apply-patch")
            && request.subresource.is_none()
        {
            return create(objects, request, body);
        }
        return Err(ApiError::not_found(&request.qualified_resource(), &name));
    };
    patch::apply(&mut patched, &request.content_type, body)?;
    let stale_check = patched["metadata"]["resourceVersion"]
        != current.unwrap_or_default()["metadata"]["resourceVersion"];
    write_over(objects, request, patched, stale_check)
}

/// Writes `object` over the stored one with kube's update rules.
fn write_over(
    objects: &mut Objects,
    request: &ApiRequest,
    mut object: Value,
    check_version: bool,
) -> Written {
    let resource = request.qualified_resource();
    let name = request.name.clone().unwrap_or_default();
    if object["metadata"]["name"]
        .as_str()
        .is_some_and(|n| n != name)
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            object["metadata"]["name"].as_str().unwrap_or_default()
        )));
    }
    let collection = collection(request);
    let key = key(request.namespace.as_deref(), &name);
    let Some(stored) = objects.get(&collection, &key).cloned() else {
        return Err(ApiError::not_found(&resource, &name));
    };
    let sent = object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if check_version
        && !sent.is_empty()
        && sent
            != stored["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
    {
        return Err(ApiError::modified(&resource, &name));
    }
    if request.subresource.as_deref() == Some("status") {
        let status = object["status"].take();
        object = stored.clone();
        object["status"] = status;
    } else {
        object["status"] = stored["status"].clone();
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
        ] {
            object["metadata"][field] = stored["metadata"][field].clone();
        }
        object["metadata"]["generation"] = stored["metadata"]["generation"].clone();
        if spec_changed(&stored, &object) {
            let generation = stored["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            object["metadata"]["generation"] = json!(generation);
        }
    }
    drop_nulls(&mut object);
    object["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    if object == stored {
        return Ok((200, stored, Vec::new()));
    }
    if is_terminating(&object) && no_finalizers(&object) && !graceful_pending(&object) {
        let change = objects.remove(&collection, &key).expect("read above");
        return Ok((200, change.object.clone(), vec![change]));
    }
    let change = objects.put(&collection, &key, object, ChangeType::Modified);
    Ok((200, change.object.clone(), vec![change]))
}

/// Whether anything outside metadata and status changed.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("status");
        }
        drop_nulls(&mut v);
        v
    };
    strip(old) != strip(new)
}

fn drop_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(drop_nulls);
    } else if let Value::Array(items) = value {
        items.iter_mut().for_each(drop_nulls);
    }
}

fn is_terminating(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

fn no_finalizers(object: &Value) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_none_or(Vec::is_empty)
}

/// A pod still waiting for its kubelet to finish a graceful deletion.
fn graceful_pending(object: &Value) -> bool {
    object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0)
        > 0
}
