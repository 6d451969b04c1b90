//! Wiring: connect to the store, start the resource actors, admission,
//! the objects every cluster has, the controllers and the aggregator,
//! assemble the handler chain, and serve HTTP until shutdown. The top of
//! the server: nothing imports it but `main` and embedders.

mod chain;
mod errors;
mod serve;
mod store;

pub use errors::StartError;

use std::future::Future;
use std::sync::Arc;

use actix_web::web;
use serde_json::json;

use crate::admission::config_file::PluginConfigurations;
use crate::admission::objects::Objects;
use crate::admission::plugins;
use crate::aggregator::proxy::Proxy;
use crate::aggregator::tls::Configs;
use crate::aggregator::{authentication_configmap, autoregister, availability, Aggregator};
use crate::auth::AuthorizerSlot;
use crate::config::ApiserverConfig;
use crate::error::ApiError;
use crate::kubelet_client::KubeletClient;
use crate::metrics::Metrics;
use crate::registry::lookup::CachedObjects;
use crate::registry::options::WriteOptions;
use crate::registry::subresource::Services;
use crate::registry::{requests, Catalog};
use crate::routes::{self, openapi, AppState};
use crate::serviceaccount::Issuer;
use crate::storage::{compactor, InProcessStore, Store};

/// Namespaces every cluster has from the start.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Runs the API server until `shutdown` completes. Must be called inside
/// an actix system (`actix_rt::System`).
pub async fn run(
    config: ApiserverConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    run_with_store(config, None, shutdown).await
}

/// As [`run`]; with `in_process`, the store is the one this process
/// embeds, reached as it hands itself over instead of `--etcd-servers`.
pub async fn run_with_store(
    config: ApiserverConfig,
    in_process: Option<InProcessStore>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let (client, store) = store::open(&config, in_process).await?;
    let arbiters = [actix::Arbiter::new(), actix::Arbiter::new()];
    let handles: Vec<_> = arbiters.iter().map(|a| a.handle()).collect();
    let catalog = Arc::new(
        Catalog::start(&store, &config.storage_prefix, config.event_ttl(), &handles).await?,
    );
    let metrics = Arc::new(Metrics::new(client.metrics()));
    let authorizer = AuthorizerSlot::default();
    let objects = install_admission(&config, &catalog, &metrics, &authorizer).await?;
    create_cluster_objects(&config, &catalog).await?;
    start_controllers(&config, &catalog, &store).await;
    let aggregator_metrics = metrics.aggregator.clone();
    let aggregator =
        start_aggregator(&config, &catalog, objects.clone(), aggregator_metrics).await?;
    if let Some(interval) = config.compaction_interval() {
        actix_rt::spawn(compactor::run(client.clone(), interval));
    }
    let issuer = issuer(&config)?;
    let chain = chain::assemble(&config, &catalog, issuer.clone(), &metrics).await?;
    let _ = authorizer.set(chain.authorizer.clone());
    start_flow_control(&catalog, &chain);
    let kubelets = KubeletClient::new(&config.kubelet, objects.clone() as Arc<dyn Objects>)?;
    let services = Arc::new(Services {
        objects: objects.clone(),
        issuer: issuer.clone(),
    });
    let state = web::Data::new(AppState {
        openapi: openapi::Documents::build(&catalog),
        catalog,
        metrics,
        store,
        chain,
        issuer,
        services,
        aggregator,
        kubelets: Arc::new(kubelets),
    });
    let served = serve::serve(&config, state, shutdown).await;
    for arbiter in arbiters {
        arbiter.stop();
    }
    served
}

/// The system namespaces, the `kubernetes` service and the system
/// PriorityClasses (see [`crate::bootstrap`]).
async fn create_cluster_objects(
    config: &ApiserverConfig,
    catalog: &Arc<Catalog>,
) -> Result<(), ApiError> {
    create_system_namespaces(catalog).await?;
    let port = match config.secure_port {
        0 => config.insecure_port,
        port => port,
    };
    crate::bootstrap::ensure_default_service(catalog, &config.bind_address, port).await?;
    crate::bootstrap::ensure_priority_classes(catalog).await
}

/// The CRD controller (ready before the first request) and the API's own
/// loops beside the server. Quota usage, the default ServiceAccounts and
/// the root CA ConfigMaps are the controller manager's.
async fn start_controllers(config: &ApiserverConfig, catalog: &Arc<Catalog>, store: &Store) {
    let prefix = config.storage_prefix.clone();
    crate::controllers::crds::start(catalog.clone(), prefix.clone()).await;
    let controllers = crate::controllers::run(store.clone(), prefix);
    actix_rt::spawn(controllers);
}

/// The loops API Priority and Fairness needs: its objects kept in place
/// and read, the seats re-divided by demand, the object counts its work
/// estimator reads.
fn start_flow_control(catalog: &Arc<Catalog>, chain: &crate::routes::chain::Chain) {
    let engine = chain.flow_control.engine.clone();
    actix_rt::spawn(crate::registry::kinds::flowcontrol::maintain::run(
        catalog.clone(),
        engine.clone(),
    ));
    actix_rt::spawn(async move { engine.adjust_periodically().await });
    let counts = chain.flow_control.counts.clone();
    let count = crate::routes::chain::flow_control::FlowControlStep::count_objects;
    actix_rt::spawn(count(counts, catalog.clone()));
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
    let mut configurations = PluginConfigurations::read(&config.admission_control_config_file)?;
    configurations.default_tolerations = plugins::DefaultTolerations {
        not_ready_seconds: config.default_not_ready_toleration_seconds,
        unreachable_seconds: config.default_unreachable_toleration_seconds,
    };
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

async fn create_system_namespaces(catalog: &Catalog) -> Result<(), ApiError> {
    let namespaces = catalog
        .find("", "v1", "namespaces")
        .expect("namespaces are always served");
    for name in SYSTEM_NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let create = requests::Create {
            namespace: String::new(),
            body,
            options: WriteOptions::by("capstan-apiserver"),
        };
        match namespaces.call(create).await {
            Ok(_) | Err(ApiError::AlreadyExists(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
