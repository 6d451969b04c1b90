//! The handler chain as the flags ask for it: the authenticators'
//! union, audit, the in-flight limits, and the `--authorization-mode`
//! authorizers behind kube's `system:masters` superuser group. A new
//! authenticator is one more entry in [`authenticator`]; a new authorizer
//! one more [`Mode`] in [`authorizer`].

use std::sync::Arc;

use super::errors::StartError;
use crate::audit::Auditor;
use crate::auth::{
    self, AlwaysAllow, AlwaysDeny, Authorizer, Mode, PrivilegedGroups, Union, MASTERS,
};
use crate::config::{ApiserverConfig, ConfigError};
use crate::flowcontrol::controller::DEFAULT_WAIT_LIMIT;
use crate::flowcontrol::{bootstrap, FlowControl};
use crate::metrics::Metrics;
use crate::registry::Catalog;
use crate::routes::chain::authentication::requestheader::RequestHeader;
use crate::routes::chain::authentication::service_account::ServiceAccounts;
use crate::routes::chain::authentication::x509::X509;
use crate::routes::chain::authentication::{self as authn, Authenticator, Insecure};
use crate::routes::chain::flow_control::FlowControlStep;
use crate::routes::chain::token_file::TokenFile;
use crate::routes::chain::watch_quota::WatchQuota;
use crate::routes::chain::{audit, Chain};
use crate::serviceaccount::Issuer;

/// The chain `config` asks for; the authorizers read `catalog`.
pub async fn assemble(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
    issuer: Option<Arc<Issuer>>,
    metrics: &Metrics,
) -> Result<Chain, StartError> {
    let authenticator = authenticator(config, catalog, issuer)?;
    let auditor = Auditor::configured(&config.audit(), metrics.audit.clone())?;
    Ok(Chain {
        flow_control: flow_control(config, metrics),
        authenticator,
        audiences: config.audiences(),
        audit: audit::Audit::new(auditor),
        authorizer: authorizer(config, catalog).await?,
        watch_quota: WatchQuota::new(config.max_watches_per_user),
    })
}

/// API Priority and Fairness over `--max-requests-inflight` +
/// `--max-mutating-requests-inflight` seats (0 and 0: as good as no
/// limit), with kube's configuration until the objects are read.
fn flow_control(config: &ApiserverConfig, metrics: &Metrics) -> FlowControlStep {
    let seats = config.max_requests_inflight + config.max_mutating_requests_inflight;
    let seats = match seats {
        0 => UNLIMITED_SEATS,
        n => u32::try_from(n).unwrap_or(UNLIMITED_SEATS),
    };
    let engine = FlowControl::new(seats, DEFAULT_WAIT_LIMIT, metrics.flow_control.clone());
    let levels: Vec<_> = bootstrap::mandatory_levels()
        .into_iter()
        .chain(bootstrap::suggested_levels())
        .collect();
    let schemas: Vec<_> = bootstrap::mandatory_schemas()
        .into_iter()
        .chain(bootstrap::suggested_schemas())
        .collect();
    engine.configure(&levels, &schemas);
    FlowControlStep::new(Arc::new(engine), metrics.in_flight.clone())
}

/// Seats when the flags set no limit.
const UNLIMITED_SEATS: u32 = 1 << 20;

/// kube-apiserver's union: static tokens, the front proxy's request
/// headers, client certificates, service-account tokens, the loopback
/// plain-HTTP superuser; anonymous if `--anonymous-auth`.
fn authenticator(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
    issuer: Option<Arc<Issuer>>,
) -> Result<Arc<dyn Authenticator>, StartError> {
    let mut authenticators: Vec<Arc<dyn Authenticator>> = Vec::new();
    if let Some(path) = &config.token_auth_file {
        authenticators.push(Arc::new(TokenFile::load(path)?));
    }
    let front_proxy_ca = &config.aggregator.requestheader_client_ca_file;
    if !front_proxy_ca.is_empty() {
        let roots = crate::serving::tls::certificates(front_proxy_ca)?;
        let settings = &config.aggregator;
        let headers = RequestHeader::new(&roots, settings).map_err(StartError::ClientCa)?;
        authenticators.push(Arc::new(headers));
    }
    if !config.client_ca_file.is_empty() {
        let roots = crate::serving::tls::certificates(&config.client_ca_file)?;
        let x509 = X509::new(&roots).map_err(StartError::ClientCa)?;
        authenticators.push(Arc::new(x509));
    }
    if let Some(issuer) = issuer {
        authenticators.push(Arc::new(ServiceAccounts {
            issuer,
            catalog: catalog.clone(),
        }));
    }
    if config.insecure_port != 0 {
        authenticators.push(Arc::new(Insecure));
    }
    Ok(Arc::new(authn::Union {
        authenticators,
        anonymous: config.anonymous_auth,
    }))
}

/// `--authorization-mode`'s authorizers in order, behind the superuser
/// group; each is ready (RBAC's policy reconciled and its informer
/// synced) before the server answers its first request.
async fn authorizer(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
) -> Result<Arc<dyn Authorizer>, StartError> {
    let modes =
        auth::parse_modes(&config.authorization_mode).map_err(|reason| ConfigError::Invalid {
            field: "authorization_mode",
            reason,
        })?;
    let mut authorizers: Vec<Arc<dyn Authorizer>> =
        vec![Arc::new(PrivilegedGroups(vec![MASTERS.into()]))];
    for mode in modes {
        authorizers.push(match mode {
            Mode::AlwaysAllow => Arc::new(AlwaysAllow),
            Mode::AlwaysDeny => Arc::new(AlwaysDeny),
            Mode::Node => Arc::new(crate::node_authorizer::start(catalog).await?),
            Mode::Rbac => Arc::new(crate::rbac::start::authorizer(catalog).await?),
        });
    }
    Ok(Arc::new(Union(authorizers)))
}
