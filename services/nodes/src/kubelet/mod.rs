//! The kubelet API of every node of the process, on its one listener:
//! the paths the API server's `pods/log`, `pods/exec`, `pods/attach` and
//! `pods/portforward` reach on a node (`/containerLogs/{ns}/{pod}/{c}`,
//! `/exec/{ns}/{pod}/{c}`, ...), answered for the node that owns the pod.
//! Requests are authorized as the kubelet authorizes them: `nodes/proxy`
//! on that node, with the HTTP method's verb.

pub mod exec;
pub mod logs;
pub mod shell;
mod streams;

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, get};
use axum::Router;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};

use crate::serving::authorization::Action;
use crate::serving::{status, Call, State as Shared};

pub fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(logs_handler::logs),
        )
        .route("/exec/{namespace}/{pod}/{container}", any(exec::exec))
        .route("/attach/{namespace}/{pod}/{container}", any(refuse_attach))
        .route("/portForward/{namespace}/{pod}", any(refuse_port_forward))
}

mod logs_handler;

/// The kubelet's verb for an HTTP method.
fn verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "get",
    }
}

/// A pod of one of this process's nodes, and the container a request names.
pub struct Target {
    pub pod: Arc<Pod>,
    pub node: String,
    pub container: Container,
}

impl Target {
    pub fn status(&self) -> Option<&ContainerStatus> {
        let status = self.pod.status.as_ref()?;
        status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
            .find(|s| s.name == self.container.name)
    }
}

/// The pod `namespace/pod` if one of this process's nodes runs it, and
/// that node, once the caller may reach the node (`nodes/proxy`).
async fn pod_on_node(
    call: &Call,
    namespace: &str,
    pod: &str,
) -> Result<(Arc<Pod>, String), Response> {
    let not_found = || {
        let message = format!("pod {namespace}/{pod} is not on a node of this process");
        status(StatusCode::NOT_FOUND, "NotFound", message)
    };
    let found = call
        .state
        .pods
        .store()
        .get(Some(namespace), pod)
        .ok_or_else(not_found)?;
    let node = found
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| call.state.fleet.get(n).is_some())
        .ok_or_else(not_found)?;
    call.authorize(&Action::on_node(verb(&call.method), &node, "proxy"))
        .await?;
    // A stopped node's kubelet would not answer at all; this listener
    // serves every node, so it says so at once instead.
    if !call.state.fleet.get(&node).is_some_and(|n| n.is_running()) {
        let message = format!("node {node} is stopped: its kubelet does not answer");
        return Err(status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        ));
    }
    Ok((found, node))
}

/// Finds the pod and container, and checks the caller may reach them.
pub async fn target(
    call: &Call,
    (namespace, pod, container): (&str, &str, &str),
) -> Result<Target, Response> {
    let (found, node) = pod_on_node(call, namespace, pod).await?;
    let spec = found.spec.clone().unwrap_or_default();
    let container = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == container)
        .cloned()
        .ok_or_else(|| {
            let message = format!("container {container} is not valid for pod {pod}");
            status(StatusCode::BAD_REQUEST, "BadRequest", message)
        })?;
    Ok(Target {
        pod: found,
        node,
        container,
    })
}

async fn refuse_attach(
    call: Call,
    Path((namespace, pod, container)): Path<(String, String, String)>,
) -> Response {
    if let Err(refused) = target(&call, (&namespace, &pod, &container)).await {
        return refused;
    }
    let message = format!(
        "attach is not simulated: the container {container} of pod {namespace}/{pod} runs no process to attach to \
         (capstan-nodes simulates its node); use kubectl logs -f or kubectl exec"
    );
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

async fn refuse_port_forward(
    call: Call,
    Path((namespace, pod)): Path<(String, String)>,
) -> Response {
    if let Err(refused) = pod_on_node(&call, &namespace, &pod).await {
        return refused;
    }
    let message = format!(
        "port-forward is not simulated: pod {namespace}/{pod} runs on a simulated node (capstan-nodes), \
         where no container listens on any port"
    );
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}
