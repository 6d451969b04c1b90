//! The manager: health and metrics, leader election gating everything,
//! one set of shared informers per leadership term, every selected
//! controller started on it and supervised, and the stop.
//!
//! Leadership is the boundary of all state: when it is lost, every
//! controller stops at once (syncs in flight are aborted), the informers
//! stop, and caches and expectations are dropped; when this process leads
//! again it rebuilds them from the API, so it acts only on what it has
//! seen, never on what a previous term assumed. The one exception is a
//! pod informer lent by the process the manager is embedded in (shared
//! with the scheduler): its cache outlives terms, but it is only ever
//! what the watch delivered, and each term's handlers end with the term.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::health::{self, Health};
use capstan_client::informer::{strip_pod_runtime_details, Informer, Informers};
use capstan_client::leader::{LeaderElector, Leadership};
use k8s_openapi::api::core::v1::Pod;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::context::Context;
use crate::controllers::{self, Descriptor};
use crate::error::Result;
use crate::identity::Clients;
use crate::metrics;

/// Pause before a controller that failed to start is started again.
const RESTART_PAUSE: Duration = Duration::from_secs(5);
/// How long a graceful stop waits for controllers to finish their syncs.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Runs the selected controllers until `shutdown` resolves. With
/// `shared_pods` (an informer on every pod, made by the host process with
/// [`strip_pod_runtime_details`] as its transform) every term uses it
/// rather than watching pods itself.
pub async fn run(
    settings: Settings,
    clients: Clients,
    shared_pods: Option<Informer<Pod>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    controllers::selection(&settings.controllers).map_err(|reason| {
        capstan_telemetry::settings::ConfigError::Invalid {
            field: "controllers",
            reason,
        }
    })?;
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.cancel();
    });
    let manager = Manager {
        settings: Arc::new(settings),
        clients: Arc::new(clients),
        health: Health::new(),
        shared_pods,
        stop,
    };
    manager.serve_health().await?;
    manager.run_terms().await;
    Ok(())
}

struct Manager {
    settings: Arc<Settings>,
    clients: Arc<Clients>,
    health: Health,
    /// The host process's pod informer, if it lends one.
    shared_pods: Option<Informer<Pod>>,
    /// Cancelled on shutdown.
    stop: CancellationToken,
}

impl Manager {
    async fn serve_health(&self) -> Result<()> {
        if self.settings.secure_port == 0 {
            return Ok(());
        }
        let address = format!(
            "{}:{}",
            self.settings.bind_address, self.settings.secure_port
        );
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|source| capstan_client::Error::Serve {
                address: address.clone(),
                source,
            })?;
        tracing::info!(%address, "serving /healthz, /readyz and /metrics");
        let stop = self.stop.clone();
        let health = self.health.clone();
        tokio::spawn(async move {
            if let Err(err) =
                health::serve(listener, health, async move { stop.cancelled().await }).await
            {
                tracing::error!(%err, "health server stopped");
            }
        });
        Ok(())
    }

    /// Leads (or waits to), runs the controllers while leading, and starts
    /// over when leadership is lost, until shutdown.
    async fn run_terms(&self) {
        let lease = self.settings.leader_elect_resource_name.clone();
        // Standing by counts as ready: a follower is healthy.
        self.health.set_ready(true);
        loop {
            let leadership = match self.lead().await {
                Some(leadership) => leadership,
                None => return,
            };
            metrics::set_leader(&lease, true);
            let term = leadership
                .as_ref()
                .map_or_else(CancellationToken::new, Leadership::token);
            let ended_by_shutdown = self.run_term(&term).await;
            metrics::set_leader(&lease, false);
            if let Some(leadership) = leadership {
                if ended_by_shutdown {
                    leadership.release().await;
                }
            }
            if ended_by_shutdown || self.stop.is_cancelled() {
                return;
            }
            tracing::warn!(%lease, "leadership lost: every controller stopped; standing by");
        }
    }

    /// Waits for leadership: `Some(None)` without leader election,
    /// `None` if shutdown came first.
    async fn lead(&self) -> Option<Option<Leadership>> {
        if !self.settings.leader_elect {
            return Some(None);
        }
        let config = match self.settings.leader_election() {
            Ok(config) => config,
            Err(err) => {
                tracing::error!(%err, "leader election settings");
                return None;
            }
        };
        let elector = LeaderElector::new(self.clients.root(), config);
        tracing::info!(identity = %elector.identity(), "waiting to lead");
        tokio::select! {
            _ = self.stop.cancelled() => None,
            leadership = elector.acquire() => Some(Some(leadership)),
        }
    }

    /// One term: fresh informers, every controller; ends when leadership
    /// is lost (false) or on shutdown (true).
    async fn run_term(&self, leadership: &CancellationToken) -> bool {
        let informers = Informers::new(self.clients.root());
        match &self.shared_pods {
            Some(pods) => informers.adopt(pods),
            None => informers.set_transform::<Pod>(strip_pod_runtime_details),
        }
        let ctx = Arc::new(Context {
            informers,
            settings: self.settings.clone(),
            clients: self.clients.clone(),
            stop: CancellationToken::new(),
        });
        let mut running = JoinSet::new();
        // Checked in `run` before the first term.
        let selected = controllers::selection(&self.settings.controllers).unwrap_or_default();
        for descriptor in selected {
            tracing::info!(controller = descriptor.name, "starting");
            running.spawn(supervise(descriptor, ctx.clone()));
        }
        let by_shutdown = tokio::select! {
            _ = self.stop.cancelled() => true,
            _ = leadership.cancelled() => false,
        };
        ctx.stop.cancel();
        if by_shutdown {
            let drained = async { while running.join_next().await.is_some() {} };
            let _ = tokio::time::timeout(STOP_GRACE, drained).await;
        }
        running.abort_all();
        ctx.informers.shutdown();
        by_shutdown
    }
}

/// Runs one controller until the context stops, starting it again after
/// a pause if it fails (a missing permission, the API away), so one
/// controller's trouble never stops the others.
async fn supervise(descriptor: Descriptor, ctx: Arc<Context>) {
    while !ctx.stop.is_cancelled() {
        match (descriptor.start)(ctx.clone()).await {
            Ok(()) => return,
            Err(err) => {
                tracing::error!(controller = descriptor.name, %err, "controller failed; restarting");
            }
        }
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(RESTART_PAUSE) => {}
        }
    }
}
