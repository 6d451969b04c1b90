//! The handler chain every resource request goes through, in
//! kube-apiserver's order, each step one module with one job:
//! panic recovery → request info → max in flight → authentication → audit
//! → impersonation → authorization → the REST handler
//! (`routes::resource::dispatch`). Authentication, audit and authorization
//! are traits whose first implementations allow everything and record
//! nothing beyond a trace, so the issues that fill them in change
//! [`Chain::allow_all`]'s replacement, not the per-verb code.
//!
//! Request info is parsed before the panic guard, as the request's span
//! and metrics are labelled with it; parsing is pure and cannot panic on
//! any input (it returns an error instead).

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod impersonation;
pub mod max_in_flight;
pub mod non_resource;
pub mod panic_recovery;
pub mod token_file;

use std::sync::Arc;
use std::time::Instant;

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use tracing::Instrument;

use super::request_info::RequestInfo;
use super::resource;
use super::AppState;
use crate::error::ApiError;
use crate::registry::options::{parse_query, Query};
use crate::serving::Peer;

/// The chain's pluggable steps.
pub struct Chain {
    pub in_flight: max_in_flight::MaxInFlight,
    pub authenticator: Arc<dyn authentication::Authenticator>,
    /// The audiences a request's token must be for (`--api-audiences`).
    pub audiences: Vec<String>,
    pub audit: Arc<dyn audit::AuditSink>,
    pub authorizer: Arc<dyn authorization::Authorizer>,
}

impl Chain {
    /// Every request is anonymous and allowed; audit events go to traces.
    pub fn allow_all() -> Chain {
        Chain {
            in_flight: max_in_flight::MaxInFlight::default(),
            authenticator: Arc::new(authentication::Anonymous),
            audiences: Vec::new(),
            audit: Arc::new(audit::TraceSink),
            authorizer: Arc::new(authorization::AlwaysAllow),
        }
    }
}

impl Chain {
    /// The chain `config` asks for: the given authenticators' union
    /// (see `startup::authenticator`) and `--authorization-mode`.
    pub async fn configured(
        config: &crate::config::ApiserverConfig,
        catalog: &Arc<crate::registry::Catalog>,
        authenticator: Arc<dyn authentication::Authenticator>,
    ) -> Result<Chain, crate::startup::StartError> {
        let modes = authorization::parse_modes(&config.authorization_mode)
            .map_err(|why| ApiError::BadRequest(format!("--authorization-mode: {why}")))?;
        Ok(Chain {
            authenticator,
            audiences: config.audiences(),
            authorizer: crate::rbac::setup::authorizer(&modes, catalog).await?,
            ..Chain::allow_all()
        })
    }
}

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
    let steps = steps(&req, payload, &state, info, &query);
    let response = panic_recovery::guard(steps)
        .instrument(span.clone())
        .await
        .unwrap_or_else(|e| e.error_response());
    let code = response.status().as_u16();
    let seconds = started.elapsed().as_secs_f64();
    span.record("code", code);
    tracing::debug!(parent: &span, elapsed_ms = seconds * 1000.0, "served");
    state.metrics.observe(verb, &resource, code, seconds);
    response
}

/// Every step after request info, in order.
async fn steps(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: Result<RequestInfo, ApiError>,
    query: &Query,
) -> Result<HttpResponse, ApiError> {
    let info = info?;
    let chain = &state.chain;
    let _permit = chain.in_flight.admit(&info)?;
    let user = authenticate(req, chain).await?;
    let user = impersonation::apply(req.headers(), user, &info, chain.authorizer.as_ref())?;
    // Later steps (access reviews, RBAC's escalation checks) ask who it is.
    req.extensions_mut().insert(user.clone());
    let served = match authorization::check(
        chain.authorizer.as_ref(),
        &authorization::attributes(&user, &info),
    ) {
        Ok(()) => resource::dispatch(req, payload, state, &info, query).await,
        Err(denied) => Err(denied),
    };
    let code = match &served {
        Ok(response) => response.status().as_u16(),
        Err(err) => err.code(),
    };
    chain.audit.record(&audit::Event {
        user: &user,
        info: &info,
        code,
    });
    served
}

/// The request's user, from its headers and its connection.
pub(crate) async fn authenticate(
    req: &HttpRequest,
    chain: &Chain,
) -> Result<authentication::User, ApiError> {
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
