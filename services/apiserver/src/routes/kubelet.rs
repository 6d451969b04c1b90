//! The pod subresources a kubelet serves: `log`, `exec`, `attach` and
//! `portforward`. Capstan runs no kubelet, so after the checks
//! kube-apiserver makes before it would proxy (the pod exists, the
//! container is one of its own or the only one, the pod has a node) the
//! answer is an error that says why, never a bare 404.

use actix_web::HttpResponse;
use serde_json::Value;

use super::request_info::{RequestInfo, Verb};
use crate::error::ApiError;
use crate::registry::actor;
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::options::Query;

/// Which verbs reach each subresource (exec, attach and portforward are
/// upgraded connections, opened with GET or POST).
fn verb_allowed(subresource: &str, verb: Verb) -> bool {
    match subresource {
        "log" => verb == Verb::Get,
        _ => matches!(verb, Verb::Get | Verb::Create),
    }
}

pub async fn refuse(
    entry: &Entry,
    info: &RequestInfo,
    query: &Query,
    subresource: &str,
) -> Result<HttpResponse, ApiError> {
    let addressed = info.namespace.is_some() && info.name.is_some();
    if !addressed || !verb_allowed(subresource, info.verb) {
        return Err(ApiError::MethodNotAllowed);
    }
    let name = info.name.clone().unwrap_or_default();
    let pod = entry
        .actor
        .send(actor::Get {
            namespace: info.namespace.clone().unwrap_or_default(),
            name: name.clone(),
            part: Part::Main,
            resource_version: None,
        })
        .await??;
    let target = match subresource {
        "portforward" => "its ports".to_string(),
        _ => format!("container {}", container(&pod, &name, query)?),
    };
    match pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        None => Err(ApiError::BadRequest(format!(
            "pod {name} does not have a host assigned, so {target} cannot be reached \
             (capstan runs no kubelet)"
        ))),
        Some(node) => Err(ApiError::Unavailable(format!(
            "pod {name} is on node {node}, and capstan runs no kubelet to reach {target} \
             through ({subresource})"
        ))),
    }
}

/// The container a request names, or the pod's only one.
fn container(pod: &Value, name: &str, query: &Query) -> Result<String, ApiError> {
    let containers: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|field| pod["spec"][field].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    match query.get("container").filter(|c| !c.is_empty()) {
        Some(container) if !containers.contains(&container.as_str()) => Err(ApiError::BadRequest(
            format!("container {container} is not valid for pod {name}"),
        )),
        Some(container) => Ok(container.clone()),
        None if pod["spec"]["containers"].as_array().map_or(0, Vec::len) == 1 => {
            Ok(containers[0].to_string())
        }
        None => Err(ApiError::BadRequest(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}
