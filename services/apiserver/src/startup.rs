//! Wiring: connect to the store, start the resource actors, make sure the
//! system namespaces exist, and serve HTTP until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpServer};
use serde_json::json;

use crate::admission::authorize::AuthorizerSlot;
use crate::admission::config_file::PluginConfigurations;
use crate::admission::objects::Objects;
use crate::admission::plugins;
use crate::aggregator::proxy::Proxy;
use crate::aggregator::tls::Configs;
use crate::aggregator::{authentication_configmap, autoregister, availability, Aggregator};
use crate::config::ApiserverConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::registry::lookup::CachedObjects;
use crate::registry::options::WriteOptions;
use crate::registry::{actor, Catalog};
use crate::routes::chain::authentication::requestheader::RequestHeader;
use crate::routes::chain::authentication::service_account::ServiceAccounts;
use crate::routes::chain::authentication::x509::X509;
use crate::routes::chain::authentication::{Authenticator, Insecure, Union};
use crate::routes::{self, openapi, AppState};
use crate::serviceaccount::Issuer;
use crate::storage::encryption::{self, Encryption};
use crate::storage::{compactor, Connection, StorageError, Store};

/// Namespaces every cluster has from the start.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How long to wait for the store at start (an embedded store may still
/// be electing its leader).
const STORE_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("store: {0}")]
    Store(#[from] StorageError),
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] ApiError),
    #[error("authentication: {0}")]
    TokenFile(#[from] routes::chain::token_file::TokenFileError),
    #[error("http: {0}")]
    Http(#[from] std::io::Error),
    #[error("{0}")]
    Tls(#[from] crate::serving::tls::TlsError),
    #[error("--client-ca-file: {0:?}")]
    ClientCa(webpki::Error),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("--admission-control-config-file {0}")]
    AdmissionConfig(#[from] crate::admission::config_file::AdmissionConfigError),
    #[error("--root-ca-file {0}: {1}")]
    RootCa(String, std::io::Error),
    #[error("service-account keys: {0}")]
    Keys(#[from] crate::serviceaccount::keys::KeyError),
    #[error("audit: {0}")]
    Audit(#[from] crate::audit::AuditError),
    #[error("--encryption-provider-config {file}: {error}")]
    Encryption {
        file: String,
        error: crate::storage::encryption::EncryptionError,
    },
}

/// Runs the API server until `shutdown` completes. Must be called inside
/// an actix system (`actix_rt::System`).
pub async fn run(
    config: ApiserverConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let encryption = encryption(&config)?;
    let client = connect(&config).await?;
    let store = Store::new(&client).with_encryption(encryption);
    let arbiters = [actix::Arbiter::new(), actix::Arbiter::new()];
    let handles: Vec<_> = arbiters.iter().map(|a| a.handle()).collect();
    let catalog = Arc::new(
        Catalog::start(&store, &config.storage_prefix, config.event_ttl(), &handles).await?,
    );
    let metrics = Arc::new(Metrics::new(client.metrics()));
    let authorizer_slot = AuthorizerSlot::default();
    let objects = install_admission(&config, &catalog, &metrics, &authorizer_slot).await?;
    create_system_namespaces(&catalog).await?;
    let port = match config.secure_port {
        0 => config.insecure_port,
        port => port,
    };
    crate::bootstrap::ensure_default_service(&catalog, &config.bind_address, port).await?;
    crate::bootstrap::ensure_priority_classes(&catalog).await?;
    crate::controllers::crds::start(catalog.clone(), config.storage_prefix.clone()).await;
    let controllers = crate::controllers::run(
        catalog.clone(),
        store.clone(),
        config.storage_prefix.clone(),
    );
    actix_rt::spawn(controllers);
    let root_ca = root_ca(&config)?;
    actix_rt::spawn(crate::controllers::service_accounts::run(
        catalog.clone(),
        objects.clone(),
        root_ca,
    ));
    let aggregator_metrics = metrics.aggregator.clone();
    let aggregator =
        start_aggregator(&config, &catalog, objects.clone(), aggregator_metrics).await?;
    actix_rt::spawn(crate::controllers::resource_quotas::run(objects));
    if let Some(interval) = config.compaction_interval() {
        actix_rt::spawn(compactor::run(client.clone(), interval));
    }
    let issuer = issuer(&config)?;
    let authenticators = authenticator(&config, &catalog, issuer.clone())?;
    let chain =
        routes::chain::Chain::configured(&config, &catalog, authenticators, &metrics).await?;
    let for_admission = crate::rbac::for_admission::ForAdmission(chain.authorizer.clone());
    let _ = authorizer_slot.set(Arc::new(for_admission));
    let state = web::Data::new(AppState {
        openapi: openapi::Documents::build(&catalog),
        catalog: catalog.clone(),
        metrics,
        store,
        chain,
        issuer,
        aggregator,
    });
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(actix_web::middleware::from_fn(
                routes::chain::non_resource::guard,
            ))
            .configure(routes::configure)
    })
    .workers(2)
    .disable_signals()
    .on_connect(crate::serving::tag_connection);
    if let Some(tls) = tls(&config)? {
        server =
            server.bind_rustls_0_23((config.bind_address.as_str(), config.secure_port), tls)?;
    }
    if config.insecure_port != 0 {
        tracing::warn!(
            port = config.insecure_port,
            "serving plain HTTP on 127.0.0.1 as a superuser"
        );
        server = server.bind(("127.0.0.1", config.insecure_port))?;
    }
    for address in server.addrs() {
        tracing::info!(%address, "capstan-apiserver serving");
    }
    let server = server.run();
    let handle = server.handle();
    tokio::select! {
        result = server => result?,
        _ = shutdown => handle.stop(true).await,
    }
    for arbiter in arbiters {
        arbiter.stop();
    }
    Ok(())
}

/// Puts the admission plugins the flags ask for into every type's
/// chain; they look objects up through the resource actors' caches.
async fn install_admission(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
    metrics: &Metrics,
    authorizer: &AuthorizerSlot,
) -> Result<Arc<CachedObjects>, StartError> {
    let objects = CachedObjects::of(catalog).await.with_custom_types(catalog);
    let objects = Arc::new(objects);
    let names = config.admission_plugins()?;
    let configurations = PluginConfigurations::read(&config.admission_control_config_file)?;
    let installed = plugins::build(
        &names,
        objects.clone() as Arc<dyn Objects>,
        &metrics.webhooks,
        &configurations,
        authorizer,
    );
    catalog.admission.install(installed);
    tracing::info!(plugins = ?catalog.admission.names(), "admission");
    Ok(objects)
}

/// The CA the `kube-root-ca.crt` ConfigMaps publish, if one is given.
fn root_ca(config: &ApiserverConfig) -> Result<Option<String>, StartError> {
    match config.root_ca_file.as_str() {
        "" => Ok(None),
        path => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|err| StartError::RootCa(path.into(), err)),
    }
}

/// Encryption at rest as `--encryption-provider-config` says (nothing
/// encrypted without it); a file that cannot be used stops the start.
fn encryption(config: &ApiserverConfig) -> Result<Arc<Encryption>, StartError> {
    let file = &config.encryption_provider_config;
    if file.is_empty() {
        return Ok(Arc::new(Encryption::none()));
    }
    let rules =
        encryption::load(std::path::Path::new(file)).map_err(|error| StartError::Encryption {
            file: file.clone(),
            error,
        })?;
    let builtin: Vec<(String, String)> = crate::registry::kinds::all()
        .iter()
        .map(|s| (s.def().group.to_string(), s.def().resource.to_string()))
        .collect();
    tracing::info!(%file, rules = rules.len(), "encryption at rest configured");
    Ok(Arc::new(Encryption::new(
        &config.storage_prefix,
        rules,
        &builtin,
    )))
}

/// The rustls configuration of the secure port, unless it is off.
fn tls(config: &ApiserverConfig) -> Result<Option<rustls::ServerConfig>, StartError> {
    if config.secure_port == 0 {
        return Ok(None);
    }
    let client_ca = Some(config.client_ca_file.as_str()).filter(|f| !f.is_empty());
    let tls = crate::serving::tls::server_config(
        &config.tls_cert_file,
        &config.tls_private_key_file,
        client_ca,
    )?;
    Ok(Some(tls))
}

/// The service-account token issuer, when this server signs or verifies
/// tokens.
fn issuer(config: &ApiserverConfig) -> Result<Option<Arc<Issuer>>, StartError> {
    let signing = Some(config.service_account_signing_key_file.as_str()).filter(|f| !f.is_empty());
    let key_files = config.service_account_key_files();
    if signing.is_none() && key_files.is_empty() {
        return Ok(None);
    }
    let issuer = Issuer::load(
        &config.service_account_issuer,
        config.audiences(),
        signing,
        &key_files,
    )?;
    Ok(Some(Arc::new(issuer)))
}

/// kube-apiserver's union: static tokens, client certificates, service-account tokens,
/// the loopback plain-HTTP superuser; anonymous if `--anonymous-auth`.
fn authenticator(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
    issuer: Option<Arc<Issuer>>,
) -> Result<Arc<dyn Authenticator>, StartError> {
    let mut authenticators: Vec<Arc<dyn Authenticator>> = Vec::new();
    if let Some(path) = &config.token_auth_file {
        authenticators.push(Arc::new(routes::chain::token_file::TokenFile::load(path)?));
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
    Ok(Arc::new(Union {
        authenticators,
        anonymous: config.anonymous_auth,
    }))
}

/// The aggregator: the Local APIServices, the availability controller,
/// the front-proxy client, and the ConfigMap extension servers read.
async fn start_aggregator(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
    objects: Arc<CachedObjects>,
    metrics: crate::aggregator::AggregatorMetrics,
) -> Result<Arc<Aggregator>, StartError> {
    // The built-in groups only: custom ones get theirs from the
    // availability controller, which also removes them.
    let mut served: Vec<(&str, &str)> = Vec::new();
    for entry in catalog.entries() {
        let def = entry.strategy.def();
        if !served.contains(&(def.group, def.version)) {
            served.push((def.group, def.version));
        }
    }
    let mut reviews = Vec::new();
    for review in &routes::reviews::REVIEWS {
        if !served.contains(&(review.group, review.version)) {
            served.push((review.group, review.version));
            reviews.push((review.group, review.version));
        }
    }
    autoregister::ensure_local(catalog, &served).await?;
    let client_ca = std::fs::read_to_string(&config.client_ca_file).ok();
    let data = authentication_configmap::data(&config.aggregator, client_ca.as_deref());
    // Another API server on the same store may be writing it at once:
    // the one that loses the race leaves it to the winner.
    if let Err(err) = authentication_configmap::publish(catalog, data).await {
        tracing::warn!(%err, "publishing extension-apiserver-authentication");
    }
    let identity = config.aggregator.client_identity()?;
    let proxy = Proxy::new(Configs::new(identity));
    let objects = objects as Arc<dyn Objects>;
    let aggregator = Arc::new(Aggregator::new(proxy, objects, metrics));
    actix_rt::spawn(availability::run(
        catalog.clone(),
        aggregator.clone(),
        reviews,
    ));
    Ok(aggregator)
}

/// The store's members, once one of them answers a read (any member will
/// do: the connection moves to another when its member goes).
async fn connect(config: &ApiserverConfig) -> Result<Connection, StorageError> {
    let tls = config
        .etcd_tls()
        .map_err(|err| StorageError::Unavailable(err.to_string()))?;
    let connection = Connection::with_tls(&config.endpoints(), tls).await?;
    let deadline = Instant::now() + STORE_WAIT;
    loop {
        match Store::new(&connection).current_revision().await {
            Ok(_) => return Ok(connection),
            Err(err) if Instant::now() >= deadline => return Err(err),
            Err(err) => {
                tracing::info!(%err, "waiting for the store");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

async fn create_system_namespaces(catalog: &Catalog) -> Result<(), ApiError> {
    let namespaces = catalog
        .find("", "v1", "namespaces")
        .expect("namespaces are always served");
    for name in SYSTEM_NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let create = actor::Create {
            namespace: String::new(),
            body,
            options: WriteOptions::by("capstan-apiserver"),
        };
        match namespaces.actor.send(create).await {
            Ok(Ok(_)) | Ok(Err(ApiError::AlreadyExists(_))) => {}
            Ok(Err(err)) => return Err(err),
            Err(err) => return Err(ApiError::Internal(err.to_string())),
        }
    }
    Ok(())
}
