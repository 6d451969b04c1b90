//! `pods/<name>/binding` (and the older `bindings` collection): how a
//! scheduler assigns a pod to a node. The pod's spec is otherwise
//! immutable, so this is its own small flow: admit the Binding (a CREATE
//! of `pods/binding`, as webhooks and policies see it in kube), set
//! `spec.nodeName` once, mark the pod scheduled, compare-and-swap, retry
//! on a concurrent write.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::error::{ApiError, Cause};
use crate::object::meta;
use crate::object::time::now_rfc3339;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::subresource::{Answer, Call, Handler, ResponseKind, Serve, Subresource};
use crate::storage::StorageError;

/// The `binding` entry of the pods' table.
pub const BINDING: Subresource = Subresource {
    name: "binding",
    response: Some(ResponseKind {
        group: "",
        version: "v1",
        kind: "Binding",
    }),
    verbs: &["create"],
    serve: Serve::Create(&Binding),
    collection: Some("bindings"),
};

pub struct Binding;

impl Handler for Binding {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>> {
        Box::pin(bind(call))
    }
}

/// Where a Binding sends the pod, after the checks kube-apiserver makes.
fn target_node(binding: &Value, pod_name: &str) -> Result<String, ApiError> {
    let kind_ok = binding["kind"].as_str().is_none_or(|k| k == "Binding");
    let version_ok = binding["apiVersion"].as_str().is_none_or(|v| v == "v1");
    if !binding.is_object() || !kind_ok || !version_ok {
        return Err(ApiError::BadRequest(
            "the body of the request is not a v1 Binding".into(),
        ));
    }
    let named = meta::name(binding);
    if !named.is_empty() && named != pod_name {
        return Err(ApiError::BadRequest(format!(
            "name in URL does not match name in Binding object: {pod_name} != {named}"
        )));
    }
    let target = &binding["target"];
    let mut causes = Vec::new();
    if target["kind"]
        .as_str()
        .is_some_and(|k| !k.is_empty() && k != "Node")
    {
        causes.push(Cause::invalid(
            "target.kind",
            target["kind"].as_str().unwrap_or(""),
            "must be empty or 'Node'",
        ));
    }
    let node = target["name"].as_str().unwrap_or("");
    if node.is_empty() {
        causes.push(Cause::required("target.name"));
    }
    if !causes.is_empty() {
        let target = crate::error::Target {
            group: String::new(),
            resource: "bindings".into(),
            name: pod_name.into(),
        };
        return Err(ApiError::invalid(target, "Binding", causes));
    }
    Ok(node.to_string())
}

/// The pod as the binding leaves it: on `node`, PodScheduled true, and
/// carrying the binding's annotations.
fn bound(pod: &Value, node: &str, binding: &Value) -> Value {
    let mut pod = pod.clone();
    pod["spec"]["nodeName"] = node.into();
    if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
        let metadata = meta::metadata_mut(&mut pod);
        let merged = metadata.entry("annotations").or_insert_with(|| json!({}));
        for (key, value) in annotations {
            merged[key] = value.clone();
        }
    }
    let scheduled = json!({"type": "PodScheduled", "status": "True",
                           "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
    let conditions = pod["status"]["conditions"].take();
    let mut conditions: Vec<Value> = conditions.as_array().cloned().unwrap_or_default();
    conditions.retain(|c| c["type"] != "PodScheduled");
    conditions.push(scheduled);
    pod["status"]["conditions"] = conditions.into();
    pod
}

/// Binds the pod `call` names to the node its body names; the answer is
/// the Success Status kube-apiserver gives (201).
async fn bind(call: Call<'_>) -> Result<Answer, ApiError> {
    let name = call.name;
    let binding = call.body.clone().unwrap_or_default();
    target_node(&binding, name)?;
    let mut binding = call.admissible(binding, "v1", "Binding");
    call.admit_create(BINDING.name, &mut binding).await?;
    let node = target_node(&binding, name)?;
    let storage_error = |e| storage_errors::api_error(e, call.target.clone(), Reading::Plain);
    let conflict = |why: String| ApiError::Conflict(call.target.clone(), why);
    loop {
        let found = call.store.get(&call.key).await.map_err(storage_error)?;
        let current = found.ok_or_else(|| ApiError::NotFound(call.target.clone()))?;
        let pod = &current.object;
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            return Err(conflict(format!(
                "pod {name} is already assigned to node \"{assigned}\""
            )));
        }
        if !call.options.dry_run {
            let new = bound(pod, &node, &binding);
            match call
                .store
                .update(&call.key, &new, current.mod_revision)
                .await
            {
                Ok(_) => {}
                Err(StorageError::Conflict) => continue,
                Err(e) => return Err(storage_error(e)),
            }
        }
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201});
        return Ok(Answer { code: 201, body });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_needs_a_node_and_the_pods_name() {
        let ok = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                        "target": {"kind": "Node", "name": "n1"}});
        assert_eq!(target_node(&ok, "p").unwrap(), "n1");
        assert!(matches!(
            target_node(&ok, "q"),
            Err(ApiError::BadRequest(_))
        ));
        let no_node = json!({"target": {"kind": "Node"}});
        assert!(matches!(
            target_node(&no_node, "p"),
            Err(ApiError::Invalid(_))
        ));
        let wrong_kind = json!({"target": {"kind": "Pod", "name": "x"}});
        assert!(matches!(
            target_node(&wrong_kind, "p"),
            Err(ApiError::Invalid(_))
        ));
    }

    #[test]
    fn binding_sets_the_node_and_a_single_scheduled_condition() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {},
                         "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
        let binding = json!({"metadata": {"annotations": {"a": "b"}}});
        let new = bound(&pod, "n1", &binding);
        assert_eq!(new["spec"]["nodeName"], "n1");
        assert_eq!(new["metadata"]["annotations"]["a"], "b");
        let conditions = new["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "True");
    }
}
