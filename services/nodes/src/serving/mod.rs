//! The process's one HTTPS listener, at every node's daemon endpoint:
//! the kubelet API of all its nodes (`/containerLogs`, `/exec`, ...) and
//! metrics.k8s.io (for the API server's aggregator). Callers are
//! authenticated by client certificate or front proxy and authorized by
//! the API server, as a kubelet and metrics-server do.

pub mod authentication;
pub mod authorization;
pub mod certificates;
pub mod listener;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use capstan_client::informer::Informer;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use crate::runtime::fleet::SharedFleet;
use authentication::{Authentication, Caller, Peer};
use authorization::{Action, Authorizer};

/// What the handlers share.
pub struct Serving {
    pub authentication: Arc<Authentication>,
    pub authorizer: Authorizer,
    pub fleet: SharedFleet,
    /// Every pod bound to a node.
    pub pods: Informer<Pod>,
    /// Every simulated node, this process's and others'.
    pub nodes: Informer<Node>,
}

pub type State = Arc<Serving>;

impl Serving {
    /// The caller, if it may do `action`; else the answer to send.
    pub async fn authorize(
        &self,
        peer: &Peer,
        headers: &HeaderMap,
        action: &Action,
    ) -> Result<Caller, Response> {
        let caller = self.authentication.caller(peer, headers);
        if caller.user == "system:anonymous" {
            return Err(status(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "Unauthorized".into(),
            ));
        }
        if self.authorizer.allowed(&caller, action).await {
            return Ok(caller);
        }
        let subresource = if action.subresource.is_empty() {
            String::new()
        } else {
            format!(", subresource={}", action.subresource)
        };
        Err(status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "Forbidden (user={}, verb={}, resource={}{subresource})",
                caller.user, action.verb, action.resource
            ),
        ))
    }
}

/// One request as the handlers see it: the shared state, the connection's
/// peer, the method and headers (what authorization needs).
pub struct Call {
    pub state: State,
    pub peer: Peer,
    pub method: Method,
    pub headers: HeaderMap,
}

impl Call {
    /// The caller, if it may do `action`; else the answer to send.
    pub async fn authorize(&self, action: &Action) -> Result<Caller, Response> {
        self.state
            .authorize(&self.peer, &self.headers, action)
            .await
    }
}

impl FromRequestParts<State> for Call {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Call, Response> {
        Ok(Call {
            state: state.clone(),
            peer: parts
                .extensions
                .get::<Peer>()
                .cloned()
                .unwrap_or(Peer::Anonymous),
            method: parts.method.clone(),
            headers: parts.headers.clone(),
        })
    }
}

/// A Kubernetes `Status` answer.
pub fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    (code, Json(body)).into_response()
}
