//! The running process: registers the nodes, then keeps their Leases and
//! statuses and runs their pods until shut down. Everything reaches the
//! API through one [`Connection`]: reads (the pods watch, listings) as the
//! process, every write as the node it is for.

pub mod control;
pub mod fleet;
mod https;
mod leases;
mod metrics;
mod node_rights;
mod node_status;
mod pods;
mod register;
mod writes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::connect::Connection;
use capstan_client::health::Health;
use capstan_client::informer::{strip_pod_mounts_and_security, InformerOptions, Informers};
use k8s_openapi::api::core::v1::Pod;
use tokio::net::TcpListener;

use crate::error::Error;
use crate::settings::Settings;
use control::Control;
use fleet::Fleet;

/// Every pod bound to some node: the one pods watch of the process.
pub const BOUND_PODS: &str = "spec.nodeName!=";

/// Runs the nodes of `settings` through `connection` until `shutdown`
/// resolves (the entry point for `capstan-nodes` and for a process that
/// embeds simulated nodes).
pub async fn run(
    mut settings: Settings,
    connection: Connection,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let admin = TcpListener::bind(&settings.healthz_address)
        .await
        .map_err(|source| Error::Serve {
            what: "health and admin",
            address: settings.healthz_address.clone(),
            source,
        })?;
    let https = https::bind(&settings).await?;
    // Every node's daemon endpoint is the listener's port (0 picks one).
    settings.template.kubelet_port = https.local_addr().map(|a| a.port()).unwrap_or_default();
    let fleet = Arc::new(Fleet::new(
        settings.template.clone(),
        settings.nodes,
        &connection,
    )?);
    let client = connection.client();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let informers = Informers::new(client.clone());
    informers.set_transform::<Pod>(strip_pod_mounts_and_security);
    let pods = informers.get_with::<Pod>(InformerOptions::default().fields(BOUND_PODS));
    let control = Control {
        fleet: fleet.clone(),
        leases: leases::LeaseKeeper::new(fleet.clone(), settings.node_lease_parallelism),
        status: node_status::StatusReporter::new(fleet.clone()),
        pods: pods::PodSyncer::new(fleet.clone(), pods.clone(), settings.pod_run_duration),
    };
    let health = Health::new();
    serve_admin(admin, health.clone(), control.clone(), stopped.clone());
    tokio::spawn(signals(control.clone()));
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let parts = https::Parts {
        fleet,
        pods,
        informers: informers.clone(),
        client: client.clone(),
        stopped: stopped.clone(),
    };
    let mut stopped_now = stopped.clone();
    tokio::select! {
        result = start(&settings, &client, &control, &health, https, parts) => result?,
        _ = stopped_now.wait_for(|s| *s) => return Ok(()),
    }
    let _ = stopped_now.wait_for(|s| *s).await;
    tracing::info!("shutting down");
    control.leases.shutdown();
    control.status.shutdown();
    control.pods.shutdown();
    drop(informers);
    Ok(())
}

fn serve_admin(
    listener: TcpListener,
    health: Health,
    control: Control,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let router = crate::admin::router(health, control);
    tokio::spawn(async move {
        let until = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        if let Err(error) = axum::serve(listener, router)
            .with_graceful_shutdown(until)
            .await
        {
            tracing::error!(%error, "the health and admin endpoint stopped");
        }
    });
}

/// Retries `attempt` while the API cannot be reached (bad settings and
/// certificates stop at once), backing off from 200 ms to 7 s.
pub(crate) async fn retry<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let mut delay = Duration::from_millis(200);
    loop {
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(e @ (Error::Config(_) | Error::Tls(_))) => return Err(e),
            Err(error) => {
                tracing::warn!(%error, retry_in = ?delay, "could not {what}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(7));
            }
        }
    }
}

/// Registers the nodes, waits for the pods watch, counts the pods that
/// already run, starts the loops, then the HTTPS listener.
async fn start(
    settings: &Settings,
    client: &kube::Client,
    control: &Control,
    health: &Health,
    https: TcpListener,
    parts: https::Parts,
) -> Result<(), Error> {
    retry("register the nodes", || register(settings, client, control)).await?;
    control.pods.pods().wait_synced().await;
    for node in control.fleet.all() {
        control.pods.readmit_running(node);
    }
    control.leases.start();
    control.status.start();
    tokio::spawn(control.leases.clone().run());
    tokio::spawn(control.status.clone().run());
    tokio::spawn(control.pods.clone().run());
    metrics::running_nodes(control.fleet.all().len());
    https::start(settings, https, parts).await?;
    health.set_ready(true);
    tracing::info!(nodes = control.fleet.all().len(), "nodes running");
    Ok(())
}

async fn register(
    settings: &Settings,
    client: &kube::Client,
    control: &Control,
) -> Result<(), Error> {
    if let Some(first) = control.fleet.all().first() {
        node_rights::ensure(client, &first.name).await?;
    }
    register::register_all(&control.fleet, client, &settings.cluster_cidr).await
}

/// SIGUSR1 stops every node, SIGUSR2 starts them again.
async fn signals(control: Control) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut stop), Ok(mut start)) = (
        signal(SignalKind::user_defined1()),
        signal(SignalKind::user_defined2()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            Some(()) = stop.recv() => control.set_all_running(false),
            Some(()) = start.recv() => control.set_all_running(true),
            else => return,
        }
    }
}
