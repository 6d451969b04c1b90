//! The handler chain every resource request goes through, in
//! kube-apiserver's order, each step one module with one job:
//! panic recovery → request info → authentication → audit → impersonation
//! → priority and fairness → authorization → the REST handler
//! (`routes::resource::dispatch`). Priority and fairness comes after
//! authentication, as in kube, because a request is classified by who
//! sends it; the audit record sees every answer after it, panics
//! included.
//!
//! Request info is parsed before the panic guard, as the request's span
//! and metrics are labelled with it; parsing is pure and cannot panic on
//! any input (it returns an error instead).

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod flow_control;
pub mod impersonation;
pub mod non_resource;
pub mod panic_recovery;
mod steps;
pub mod token_file;
pub mod watch_quota;

pub use steps::Chain;

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use futures::FutureExt;
use tracing::Instrument;

use super::request_info::RequestInfo;
use super::resource;
use super::AppState;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::registry::options::{parse_query, Query};
use crate::serving::Peer;

/// The entry point for every path the other routes do not serve.
pub async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    let started = Instant::now();
    let query = parse_query(req.query_string());
    let info = RequestInfo::from_request(&req, &query);
    let (verb, resource) = match &info {
        Ok(i) => (i.verb.as_str(), i.resource.clone()),
        Err(_) => ("unknown", String::new()),
    };
    let span = tracing::info_span!(
        "request",
        verb,
        resource = %resource,
        path = %req.path(),
        code = tracing::field::Empty,
    );
    let served = is_served(&state, &info);
    let audit_id = audit::request_id(&req);
    let steps = steps(&req, payload, &state, info, &query, &audit_id);
    let mut response = panic_recovery::guard(steps)
        .instrument(span.clone())
        .await
        .unwrap_or_else(|e| e.error_response());
    audit::echo_id(response.headers_mut(), &audit_id);
    let code = response.status().as_u16();
    let seconds = started.elapsed().as_secs_f64();
    span.record("code", code);
    tracing::debug!(parent: &span, elapsed_ms = seconds * 1000.0, "served");
    let labelled = if served { resource.as_str() } else { "" };
    state.metrics.observe(verb, labelled, code, seconds);
    response
}

/// Whether the request names a resource this server serves: only those
/// label its metrics, so made-up paths, answered 404 or 401, add no
/// series (kube labels by the route that matched).
fn is_served(state: &AppState, info: &Result<RequestInfo, ApiError>) -> bool {
    let Ok(info) = info else {
        return false;
    };
    let (group, version) = (info.group.as_str(), info.version.as_str());
    !info.resource.is_empty()
        && state
            .catalog
            .find_any(group, version, &info.resource)
            .is_some()
}

/// Every step after request info, in order.
async fn steps(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: Result<RequestInfo, ApiError>,
    query: &Query,
    audit_id: &str,
) -> Result<HttpResponse, ApiError> {
    let info = info?;
    let chain = &state.chain;
    let target = || audit::Target::Resource(&info);
    let user = match authenticate(req, chain).await {
        Ok(user) => user,
        Err(err) => {
            chain
                .audit
                .begin(req, audit_id, None, target())
                .failed(&err);
            return Err(err);
        }
    };
    let mut record = chain.audit.begin(req, audit_id, Some(&user), target());
    let rest = after_audit(req, payload, state, &info, query, user, &mut record);
    let served = AssertUnwindSafe(rest).catch_unwind().await;
    match served {
        Ok(Ok(response)) => Ok(record.respond(response)),
        Ok(Err(err)) => {
            record.failed(&err);
            Err(err)
        }
        Err(panic) => {
            record.panicked(&panic_recovery::describe(panic.as_ref()));
            std::panic::resume_unwind(panic)
        }
    }
}

/// The steps the audit record watches.
async fn after_audit(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
    authenticated: UserInfo,
    record: &mut audit::Record,
) -> Result<HttpResponse, ApiError> {
    let chain = &state.chain;
    let authorizer = chain.authorizer.as_ref();
    let user = impersonation::apply(req.headers(), authenticated.clone(), info, authorizer)?;
    record.impersonated(&authenticated, &user);
    let held = match chain.flow_control.admit(info, query, &user).await {
        Ok(held) => held,
        Err(too_many) => return Ok(too_many),
    };
    // Later steps (access reviews, RBAC's escalation checks) ask who it is.
    req.extensions_mut().insert(user.clone());
    let selectors = authorization::Selectors::of(info, query);
    let attributes = authorization::attributes(&user, info, req.path(), &selectors);
    let allowed = authorization::check(authorizer, &attributes);
    record.authorized(allowed.is_ok());
    allowed?;
    let payload = record.request_body(req, payload).await?;
    let mut response = match state.aggregator.remote(&info.group, &info.version) {
        Some(remote) => super::aggregated::proxy(req, payload, state, &remote, &user).await?,
        None => resource::dispatch(req, payload, state, info, query).await?,
    };
    // The response has started (a watch's stream is open): its seat is
    // given back now.
    if let Some(held) = held {
        held.mark(response.headers_mut());
    }
    Ok(response)
}

/// The request's user, from its headers and its connection.
pub(crate) async fn authenticate(req: &HttpRequest, chain: &Chain) -> Result<UserInfo, ApiError> {
    let peer = req.conn_data::<Peer>();
    let (peer_certificates, insecure) = match peer {
        Some(Peer::Tls(chain)) => (chain.as_slice(), false),
        Some(Peer::Insecure) => (&[][..], true),
        None => (&[][..], false),
    };
    let credentials = authentication::Credentials {
        headers: req.headers(),
        peer_certificates,
        insecure,
        audiences: &chain.audiences,
    };
    authentication::user_of(chain.authenticator.as_ref(), &credentials).await
}
