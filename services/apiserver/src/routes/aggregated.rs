//! Requests for a group/version an APIService sends to an extension API
//! server: after authentication and authorization, the request goes on
//! with the user in X-Remote-* headers (`crate::aggregator`), and the
//! answer streams back as it comes (a watch stays open). A backend that
//! is not available, cannot be found or cannot be reached is kube's 503
//! `service unavailable`.

use actix_web::body::SizedStream;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};
use futures::StreamExt;

use super::request::read_body;
use super::AppState;
use crate::aggregator::availability::trust_of;
use crate::aggregator::headers::{self, Identity};
use crate::aggregator::proxy::{Answer, Outgoing};
use crate::aggregator::registration::Registration;
use crate::aggregator::resolve::resolve;
use crate::auth::UserInfo;
use crate::error::ApiError;

const UNAVAILABLE: &str = "service unavailable";

/// Headers of the backend's answer that describe its connection, not
/// the answer (actix frames the body itself).
const NOT_PASSED_BACK: [&str; 4] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
];

/// Proxies the request to the backend of `registration`, as `user`.
pub async fn proxy(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    registration: &Registration,
    user: &UserInfo,
) -> Result<HttpResponse, ApiError> {
    let unavailable = |why: &dyn std::fmt::Display| {
        tracing::info!(apiservice = %registration.name, %why, "aggregated API unavailable");
        ApiError::Unavailable(UNAVAILABLE.into())
    };
    let aggregator = &state.aggregator;
    let service = registration.service.as_ref();
    let Some(service) = service.filter(|_| registration.available) else {
        return Err(unavailable(&"the APIService is not available"));
    };
    let backend = resolve(service, aggregator.objects.as_ref())
        .await
        .map_err(|e| unavailable(&e))?;
    let body = read_body(payload).await?;
    let who = Identity {
        name: &user.name,
        uid: &user.uid,
        groups: &user.groups,
        extra: &user.extra,
    };
    let client = req
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()));
    let path = req
        .uri()
        .path_and_query()
        .map_or(req.path(), |p| p.as_str());
    let outgoing = Outgoing {
        method: req.method().as_str().to_string(),
        path: path.to_string(),
        headers: headers::outgoing(client, &who),
        body,
    };
    let answer = aggregator
        .proxy
        .send(&backend, &trust_of(registration), outgoing)
        .await
        .map_err(|e| unavailable(&e))?;
    Ok(respond(answer))
}

/// The backend's answer as this server's response, its body streamed.
pub(super) fn respond(answer: Answer) -> HttpResponse {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = HttpResponseBuilder::new(status);
    let mut length = None;
    for (name, value) in &answer.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "content-length" {
            let text = std::str::from_utf8(value).ok();
            length = text.and_then(|v| v.parse::<u64>().ok());
        }
        if !NOT_PASSED_BACK.contains(&lower.as_str()) {
            response.append_header((name.as_str(), value.as_slice()));
        }
    }
    let body = answer
        .body
        .map(|chunk| chunk.map_err(|e| std::io::Error::other(e.to_string())));
    match length {
        Some(length) => response.body(SizedStream::new(length, body)),
        None => response.streaming(body),
    }
}
