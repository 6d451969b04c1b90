//! DELETE, kube's way: preconditions, finalizers keep a terminating
//! object until they are removed, and a bound pod is deleted gracefully
//! (it stays, terminating, until a DELETE with grace 0: the test plays
//! the kubelet). Also pods' `binding` and `eviction` subresources.

use k8s_openapi::chrono::{Duration, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::objects::{key, ChangeType, Objects};
use super::request::ApiRequest;
use super::selectors::Selectors;
use super::status::{success, ApiError};
use super::writes::{collection, Written};

/// DELETE of one object.
pub(super) fn delete(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let options: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let grace = options["gracePeriodSeconds"].as_i64().or_else(|| {
        request
            .param("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
    });
    let name = request.name.clone().unwrap_or_default();
    delete_named(objects, request, &name, &options["preconditions"], grace)
}

fn delete_named(
    objects: &mut Objects,
    request: &ApiRequest,
    name: &str,
    preconditions: &Value,
    grace: Option<i64>,
) -> Written {
    let resource = request.qualified_resource();
    let collection = collection(request);
    let key = key(request.namespace.as_deref(), name);
    let Some(mut object) = objects.get(&collection, &key).cloned() else {
        return Err(ApiError::not_found(&resource, name));
    };
    check_preconditions(&resource, name, &object, preconditions)?;
    let grace = grace_period(request, &object, grace);
    let meta = &mut object["metadata"];
    let finalizers = meta["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    let current_grace = meta["deletionGracePeriodSeconds"].as_i64();
    if grace > 0 {
        // A graceful deletion may only be shortened.
        if current_grace.is_some_and(|g| g <= grace) {
            return Ok((200, object, Vec::new()));
        }
        meta["deletionTimestamp"] = json!(timestamp(grace));
        meta["deletionGracePeriodSeconds"] = json!(grace);
        let change = objects.put(&collection, &key, object, ChangeType::Modified);
        return Ok((200, change.object.clone(), vec![change]));
    }
    if finalizers {
        if current_grace == Some(0) {
            return Ok((200, object, Vec::new()));
        }
        meta["deletionTimestamp"] = json!(timestamp(0));
        meta["deletionGracePeriodSeconds"] = json!(0);
        let change = objects.put(&collection, &key, object, ChangeType::Modified);
        return Ok((200, change.object.clone(), vec![change]));
    }
    let change = objects.remove(&collection, &key).expect("read above");
    Ok((200, change.object.clone(), vec![change]))
}

fn timestamp(after_seconds: i64) -> String {
    (Utc::now() + Duration::seconds(after_seconds)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn check_preconditions(
    resource: &str,
    name: &str,
    object: &Value,
    preconditions: &Value,
) -> Result<(), ApiError> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(wanted) = preconditions[field].as_str() {
            let actual = object["metadata"][field].as_str().unwrap_or_default();
            if wanted != actual {
                return Err(ApiError::conflict(
                    resource,
                    name,
                    &format!("Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"),
                ));
            }
        }
    }
    Ok(())
}

/// Only bound, unfinished pods are deleted gracefully (kube's pod strategy).
fn grace_period(request: &ApiRequest, object: &Value, asked: Option<i64>) -> i64 {
    if request.group.is_empty() && request.resource == "pods" {
        let bound = object["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let finished = matches!(
            object["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if !bound || finished {
            return 0;
        }
        return asked
            .or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            .max(0);
    }
    0
}

/// DELETE of a collection (each object as a single DELETE would).
pub(super) fn delete_collection(objects: &mut Objects, request: &ApiRequest) -> Written {
    let selectors = Selectors::parse(
        request.param("labelSelector"),
        request.param("fieldSelector"),
    )
    .map_err(ApiError::bad_request)?;
    let names: Vec<String> = objects
        .list(
            &collection(request),
            request.namespace.as_deref(),
            &selectors,
        )
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let mut changes = Vec::new();
    for name in names {
        let (_, _, made) = delete_named(objects, request, &name, &Value::Null, None)?;
        changes.extend(made);
    }
    Ok((200, success(), changes))
}

/// POST pods/{name}/binding: sets `spec.nodeName` and PodScheduled, once.
pub(super) fn bind(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let binding: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding Binding: {e}")))?;
    let name = request.name.clone().unwrap_or_default();
    let node = binding["target"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid(format!(
            "Binding \"{name}\" is invalid: target.name: Required value"
        )));
    }
    let collection = collection(request);
    let key = key(request.namespace.as_deref(), &name);
    let Some(mut pod) = objects.get(&collection, &key).cloned() else {
        return Err(ApiError::not_found("pods", &name));
    };
    let refuse = |why: String| Err(ApiError::conflict("pods/binding", &name, &why));
    if pod["metadata"]["deletionTimestamp"].is_string() {
        return refuse(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(current) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return refuse(format!(
            "pod {name} is already assigned to node \"{current}\""
        ));
    }
    pod["spec"]["nodeName"] = json!(node);
    set_condition(
        &mut pod,
        json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(0)}),
    );
    let change = objects.put(&collection, &key, pod, ChangeType::Modified);
    Ok((201, success(), vec![change]))
}

fn set_condition(pod: &mut Value, condition: Value) {
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let conditions = pod["status"]["conditions"]
        .as_array_mut()
        .expect("made an array above");
    conditions.retain(|c| c["type"] != condition["type"]);
    conditions.push(condition);
}

/// POST pods/{name}/eviction: deletes the pod (no disruption budgets here).
pub(super) fn evict(objects: &mut Objects, request: &ApiRequest, body: &[u8]) -> Written {
    let eviction: Value = serde_json::from_slice(body).unwrap_or_default();
    let name = request.name.clone().unwrap_or_default();
    let options = &eviction["deleteOptions"];
    let (_, _, changes) = delete_named(
        objects,
        request,
        &name,
        &options["preconditions"],
        options["gracePeriodSeconds"].as_i64(),
    )?;
    Ok((201, success(), changes))
}
