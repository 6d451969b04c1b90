//! The pod subresources a kubelet serves: `log`, `exec`, `attach` and
//! `portforward`. Capstan runs no kubelet, so after the checks
//! kube-apiserver makes before it would proxy (the pod exists, the
//! container is one of its own or the only one, the pod has a node) the
//! answer is an error that says why, never a bare 404.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::ApiError;
use crate::registry::options::Query;
use crate::registry::storage_errors::{self, Reading};
use crate::registry::subresource::{Answer, Call, Handler, ResponseKind, Serve, Subresource};
use crate::storage::ReadAt;

/// The entries of the pods' table a kubelet would serve (exec, attach
/// and portforward are upgraded connections, opened with GET or POST).
pub const KUBELET: [Subresource; 4] = [
    connect(&Kubelet("log"), "Pod", &["get"]),
    connect(&Kubelet("exec"), "PodExecOptions", &["create", "get"]),
    connect(&Kubelet("attach"), "PodAttachOptions", &["create", "get"]),
    connect(
        &Kubelet("portforward"),
        "PodPortForwardOptions",
        &["create", "get"],
    ),
];

const fn connect(
    kubelet: &'static Kubelet,
    kind: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource {
        name: kubelet.0,
        response: Some(ResponseKind {
            group: "",
            version: "v1",
            kind,
        }),
        verbs,
        serve: Serve::Connect(kubelet),
        collection: None,
    }
}

/// One subresource a kubelet serves, by name.
pub struct Kubelet(&'static str);

impl Handler for Kubelet {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>> {
        Box::pin(refuse(call, self.0))
    }
}

/// The checks kube-apiserver makes before it proxies, then why not.
async fn refuse(call: Call<'_>, subresource: &str) -> Result<Answer, ApiError> {
    let name = call.name;
    let found = call.store.get_at(&call.key, ReadAt::Latest).await;
    let found =
        found.map_err(|e| storage_errors::api_error(e, call.target.clone(), Reading::Plain))?;
    let pod = found
        .ok_or_else(|| ApiError::NotFound(call.target.clone()))?
        .object;
    let target = match subresource {
        "portforward" => "its ports".to_string(),
        _ => format!("container {}", container(&pod, name, call.query)?),
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
