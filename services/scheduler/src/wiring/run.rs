//! The scheduler as an API client: informers feeding its handlers, leader
//! election on the Lease, the scheduling thread, and housekeeping. `run` is
//! what `capstan-scheduler` calls, and what an embedding process (capstan)
//! calls with its own client and shutdown signal.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::health::Health;
use capstan_client::informer::{
    strip_container_statuses, strip_pod_runtime_details, Informer, InformerEvent, Informers,
};
use capstan_client::leader::{default_identity, LeaderElectionConfig, LeaderElector};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use thiserror::Error;

use super::kube_api::KubeApi;
use super::listers::InformerLister;
use crate::config::SchedulerConfig;
use crate::core::metrics::Metrics;
use crate::core::Scheduler;

#[derive(Debug, Error)]
pub enum RunError {
    #[error("invalid profile: {field}: {message}")]
    Profile { field: String, message: String },
    #[error("leader election lost")]
    LeadershipLost,
}

/// The component name in Events and the user agent.
pub const COMPONENT: &str = "default-scheduler";

/// Runs the scheduler until `shutdown` resolves (Ok) or leadership is lost
/// (Err). With `shared_pods` (an informer on every pod the host process
/// lends, see `embed`) it watches no pods itself.
pub async fn run(
    config: SchedulerConfig,
    client: kube::Client,
    health: Option<Health>,
    shared_pods: Option<Informer<Pod>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let shutdown = shutdown.boxed().shared();
    register_metrics();
    let informers = Informers::new(client.clone());
    match &shared_pods {
        Some(pods) => informers.adopt(pods),
        // The scheduler writes pods only through bindings and status
        // patches, and reads no container's state.
        None => informers.set_transform::<Pod>(|pod: &mut Pod| {
            strip_pod_runtime_details(pod);
            strip_container_statuses(pod);
        }),
    }
    let lister = Arc::new(InformerLister::new(&informers));
    let api = Arc::new(KubeApi::new(client.clone(), COMPONENT));
    let scheduler = Scheduler::new(&config, lister, api, tokio::runtime::Handle::current())
        .map_err(|e| RunError::Profile {
            field: e.field,
            message: e.message,
        })?;
    connect_handlers(&informers, &scheduler);
    tokio::select! {
        _ = informers.wait_synced() => {}
        _ = shutdown.clone() => return Ok(()),
    }
    tracing::info!(profiles = ?scheduler.profile_names(), "scheduler caches synced");
    let leadership = if config.leader_election.leader_elect {
        let elector = LeaderElector::new(client.clone(), election_config(&config));
        tracing::info!(identity = elector.identity(), "waiting for the lease");
        tokio::select! {
            leadership = elector.acquire() => Some(leadership),
            _ = shutdown.clone() => return Ok(()),
        }
    } else {
        None
    };
    if let Some(health) = &health {
        health.set_ready(true);
    }
    let thread = scheduler.start();
    let housekeeping = tokio::spawn(housekeeping(scheduler.clone()));
    let lost = async {
        match &leadership {
            Some(leadership) => leadership.lost().await,
            None => futures::future::pending::<()>().await,
        }
    };
    let result = tokio::select! {
        _ = shutdown => Ok(()),
        _ = lost => Err(RunError::LeadershipLost),
    };
    scheduler.stop();
    housekeeping.abort();
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    informers.shutdown();
    if let (Some(leadership), Ok(())) = (leadership, &result) {
        leadership.release().await;
    }
    result
}

fn election_config(config: &SchedulerConfig) -> LeaderElectionConfig {
    let leader = &config.leader_election;
    LeaderElectionConfig {
        namespace: leader.resource_namespace.clone(),
        name: leader.resource_name.clone(),
        identity: default_identity(),
        lease_duration: leader.lease_duration,
        renew_deadline: leader.renew_deadline,
        retry_period: leader.retry_period,
    }
}

fn connect_handlers(informers: &Informers, scheduler: &Arc<Scheduler>) {
    let pods = scheduler.clone();
    informers
        .get::<Pod>()
        .add_handler(move |event: &InformerEvent<Pod>| match event {
            InformerEvent::Added(pod) => pods.on_pod_added(pod.clone()),
            InformerEvent::Updated { old, new } => pods.on_pod_updated(old.clone(), new.clone()),
            InformerEvent::Deleted(pod) => pods.on_pod_deleted(pod.clone()),
        });
    let nodes = scheduler.clone();
    informers
        .get::<Node>()
        .add_handler(move |event: &InformerEvent<Node>| match event {
            InformerEvent::Added(node) => nodes.on_node_added(node.clone()),
            InformerEvent::Updated { old, new } => nodes.on_node_updated(old.clone(), new.clone()),
            InformerEvent::Deleted(node) => nodes.on_node_deleted(node.clone()),
        });
}

/// Every second: drop assumptions the watch never confirmed, publish the
/// queue's sizes.
async fn housekeeping(scheduler: Arc<Scheduler>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        scheduler.cleanup_assumed();
        scheduler.metrics.set_pending(scheduler.queue().pending());
    }
}

fn register_metrics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let metrics = Metrics::global();
        use capstan_client::metrics::register;
        register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            metrics.schedule_attempts.clone(),
        );
        register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            metrics.attempt_duration.clone(),
        );
        register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type",
            metrics.pending_pods.clone(),
        );
        register(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod",
            metrics.pod_scheduling_attempts.clone(),
        );
        register(
            "scheduler_binding_duration_seconds",
            "Binding latency in seconds",
            metrics.binding_duration.clone(),
        );
        register(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            metrics.preemption_attempts.clone(),
        );
        register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            metrics.preemption_victims.clone(),
        );
    });
}
