//! Requests to a subresource a kubelet answers (`pods/log`, `exec`,
//! `attach`, `portforward`), as kube-apiserver carries them: the kind's
//! code checks and admits the request and names the node and path
//! ([`crate::registry::subresource::Connecter`]); this layer finds the
//! node's kubelet ([`crate::kubelet_client`]) and carries the bytes: a
//! log streamed as the kubelet writes it, an exec or attach as a
//! websocket relayed frame by frame (`relay`).

mod relay;

use actix_web::{web, HttpRequest, HttpResponse};
use futures::StreamExt;
use serde_json::Value;

use super::aggregated::respond;
use super::AppState;
use crate::aggregator::proxy::Answer;
use crate::aggregator::resolve::Backend;
use crate::auth::{Attributes, Decision};
use crate::error::{ApiError, Target};
use crate::kubelet_client::KubeletError;
use crate::registry::catalog::Entry;
use crate::registry::requests::{self, SubresourceRequest};
use crate::registry::subresource::{Connecter, Location};

/// The most of a kubelet's refusal read to pass it on.
const MAX_REFUSAL: usize = 16 << 10;

/// Subresources whose websocket GET is also authorized as `create`.
const UPGRADED: [&str; 3] = ["exec", "attach", "portforward"];

pub async fn serve(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    entry: &Entry,
    connecter: &'static dyn Connecter,
    subresource: &str,
    request: SubresourceRequest,
) -> Result<HttpResponse, ApiError> {
    authorize_create(state, entry, subresource, &request)?;
    let locate = requests::Locate { connecter, request };
    let Some(location) = entry.call(locate).await? else {
        return Ok(HttpResponse::Ok().content_type("text/plain").finish());
    };
    let kubelets = &state.kubelets;
    let kubelet = kubelets
        .kubelet(&location.node)
        .await
        .map_err(unreachable)?;
    if !location.upgrade {
        let answer = kubelets
            .get(&kubelet, &location)
            .await
            .map_err(unreachable)?;
        if answer.status >= 300 {
            return Err(refused(answer).await);
        }
        return Ok(respond(answer));
    }
    if relay::is_websocket(req) {
        return relay::relay(req, payload, kubelets, &kubelet, &location).await;
    }
    refuse_without_websocket(state, &kubelet, &location, subresource).await
}

/// kube authorizes the websocket GET of exec, attach and portforward as
/// `create` too (the verb of their POST), so `get pods/exec` alone does
/// not let anyone run commands.
fn authorize_create(
    state: &AppState,
    entry: &Entry,
    subresource: &str,
    request: &SubresourceRequest,
) -> Result<(), ApiError> {
    if request.verb != "get" || !UPGRADED.contains(&subresource) {
        return Ok(());
    }
    let def = entry.strategy.def();
    let user = &request.options.user;
    let attributes = Attributes::for_resource(user, "create", def.group, def.resource)
        .with_namespace(&request.namespace)
        .with_name(&request.name)
        .with_subresource(subresource);
    match state.chain.authorizer.authorize(&attributes) {
        Decision::Allow => Ok(()),
        refused => Err(ApiError::Forbidden(attributes.forbidden(refused.reason()))),
    }
}

/// An exec or attach without a websocket (kubectl's SPDY fallback): the
/// kubelet's own refusal when it has one (the container is not running),
/// else why not.
async fn refuse_without_websocket(
    state: &AppState,
    kubelet: &Backend,
    location: &Location,
    subresource: &str,
) -> Result<HttpResponse, ApiError> {
    if let Ok(answer) = state.kubelets.get(kubelet, location).await {
        if answer.status >= 300 {
            return Err(refused(answer).await);
        }
    }
    Err(ApiError::BadRequest(format!(
        "pods/{subresource} is served over websockets ({}): upgrade with one of these \
         subprotocols; SPDY is not supported",
        relay::PROTOCOLS.join(", ")
    )))
}

/// A kubelet's error answer, up to [`MAX_REFUSAL`] bytes of it read.
async fn refused(mut answer: Answer) -> ApiError {
    let mut read = Vec::new();
    while let Some(Ok(chunk)) = answer.body.next().await {
        let room = MAX_REFUSAL - read.len();
        read.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if read.len() >= MAX_REFUSAL {
            break;
        }
    }
    refusal(answer.status, read)
}

/// A kubelet's error answer as this server's: its Status when it sent
/// one, else its text with the code's reason (kube's generic response).
pub fn refusal(status: u16, body: Vec<u8>) -> ApiError {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let parsed = parsed.filter(|v| v["kind"] == "Status");
    let (reason, message) = match parsed {
        Some(status) => (
            status["reason"].as_str().unwrap_or_default().to_string(),
            status["message"].as_str().unwrap_or_default().to_string(),
        ),
        None => (
            reason_of(status).to_string(),
            String::from_utf8_lossy(&body).trim().to_string(),
        ),
    };
    ApiError::Status {
        code: status,
        reason,
        message,
    }
}

fn reason_of(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// A kubelet that cannot be found or reached, as kube answers it.
pub fn unreachable(err: KubeletError) -> ApiError {
    match err {
        KubeletError::NodeNotFound(name) => ApiError::NotFound(Target {
            group: String::new(),
            resource: "nodes".into(),
            name,
        }),
        KubeletError::Refused { status, body } => refusal(status, body),
        other => {
            tracing::info!(err = %other, "kubelet unreachable");
            ApiError::Internal(other.to_string())
        }
    }
}
