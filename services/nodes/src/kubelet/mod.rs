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

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, get};
use axum::{Extension, Router};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};

use crate::serving::authentication::Peer;
use crate::serving::authorization::Action;
use crate::serving::{status, State as Shared};

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

/// Finds the pod and container, and checks the caller may reach them.
pub async fn target(
    state: &Shared,
    peer: &Peer,
    headers: &HeaderMap,
    method: &Method,
    (namespace, pod, container): (&str, &str, &str),
) -> Result<Target, Response> {
    let not_found = || {
        status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pod {namespace}/{pod} is not on a node of this process"),
        )
    };
    let found = state
        .pods
        .store()
        .get(Some(namespace), pod)
        .ok_or_else(not_found)?;
    let node = found
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| state.fleet.get(n).is_some())
        .ok_or_else(not_found)?;
    state
        .authorize(
            peer,
            headers,
            &Action::on_node(verb(method), &node, "proxy"),
        )
        .await?;
    let spec = found.spec.as_ref().ok_or_else(not_found)?;
    let container = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == container)
        .cloned()
        .ok_or_else(|| {
            status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("container {container} is not valid for pod {pod}"),
            )
        })?;
    Ok(Target {
        pod: found,
        node,
        container,
    })
}

async fn refuse_attach(
    State(state): State<Shared>,
    Extension(peer): Extension<Peer>,
    method: Method,
    headers: HeaderMap,
    Path((namespace, pod, container)): Path<(String, String, String)>,
) -> Response {
    if let Err(refused) = target(
        &state,
        &peer,
        &headers,
        &method,
        (&namespace, &pod, &container),
    )
    .await
    {
        return refused;
    }
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        format!(
            "attach is not simulated: the container {container} of pod {namespace}/{pod} runs no process to attach to \
             (capstan-nodes simulates its node); use kubectl logs -f or kubectl exec"
        ),
    )
}

async fn refuse_port_forward(
    State(state): State<Shared>,
    Extension(peer): Extension<Peer>,
    method: Method,
    headers: HeaderMap,
    Path((namespace, pod)): Path<(String, String)>,
) -> Response {
    let not_found = status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("pod {namespace}/{pod} is not on a node of this process"),
    );
    let Some(found) = state.pods.store().get(Some(&namespace), &pod) else {
        return not_found;
    };
    let Some(node) = found
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| state.fleet.get(n).is_some())
    else {
        return not_found;
    };
    if let Err(refused) = state
        .authorize(
            &peer,
            &headers,
            &Action::on_node(verb(&method), &node, "proxy"),
        )
        .await
    {
        return refused;
    }
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        format!(
            "port-forward is not simulated: pod {namespace}/{pod} runs on a simulated node (capstan-nodes), \
             where no container listens on any port"
        ),
    )
}
