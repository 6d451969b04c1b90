//! Wiring: connect to the store, start the resource actors, make sure the
//! system namespaces exist, and serve HTTP until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpServer};
use serde_json::json;

use crate::config::ApiserverConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::registry::options::WriteOptions;
use crate::registry::{actor, Catalog};
use crate::routes::{self, openapi, AppState};
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
}

/// Runs the API server until `shutdown` completes. Must be called inside
/// an actix system (`actix_rt::System`).
pub async fn run(
    config: ApiserverConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let client = connect(&config).await?;
    let arbiters = [actix::Arbiter::new(), actix::Arbiter::new()];
    let handles: Vec<_> = arbiters.iter().map(|a| a.handle()).collect();
    let catalog = Arc::new(
        Catalog::start(
            &client,
            &config.storage_prefix,
            config.event_ttl(),
            &handles,
        )
        .await?,
    );
    create_system_namespaces(&catalog).await?;
    crate::bootstrap::ensure_default_service(&catalog, &config.bind_address, config.port).await?;
    let store = Store::new(&client);
    let controllers =
        crate::controllers::run(catalog.clone(), store, config.storage_prefix.clone());
    actix_rt::spawn(controllers);
    if let Some(interval) = config.compaction_interval() {
        actix_rt::spawn(compactor::run(client.clone(), interval));
    }
    let state = web::Data::new(AppState {
        openapi: openapi::Documents::build(&catalog),
        catalog: catalog.clone(),
        metrics: Arc::new(Metrics::new(client.metrics())),
        store: Store::new(&client),
        chain: routes::chain::Chain::configured(&config, &catalog).await?,
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(actix_web::middleware::from_fn(
                routes::chain::non_resource::guard,
            ))
            .configure(routes::configure)
    })
    .workers(2)
    .disable_signals()
    .bind((config.bind_address.as_str(), config.port))?;
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
