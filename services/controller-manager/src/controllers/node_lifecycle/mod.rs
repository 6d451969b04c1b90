//! The node lifecycle controller: a node whose kubelet stops renewing its
//! Lease (and posting status) for `--node-monitor-grace-period` has its
//! conditions set Unknown, its pods marked not ready, and, at its zone's
//! eviction rate, the `node.kubernetes.io/unreachable` NoExecute taint
//! (`not-ready` when the kubelet reports Ready=False), which the
//! taint-eviction controller acts on; a node back to Ready loses them.
//! Conditions are also mirrored as NoSchedule taints for the scheduler.
//!
//! Wiring: nodes, the Leases in `kube-node-lease`, and pods (indexed by
//! node). A node's events enqueue it; a Lease renewal only moves the
//! node's last-seen time (the node's queued look finds it); a pod bound to
//! a node that is not ready enqueues the node. A ticker recounts zones
//! every `--node-monitor-period` and taints the nodes whose turn came.

pub mod health;
mod pod_readiness;
pub mod sync;
pub mod taints;
#[cfg(test)]
mod tests;
pub mod zones;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{indexes, InformerEvent, InformerOptions};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::chrono::Utc;
use parking_lot::Mutex;

use crate::config::Settings;
use crate::context::Context;
use crate::error::Result;
use health::{Graces, Health};
use sync::Controller;
use zones::{Rates, Zones};

pub const ACCOUNT: &str = "node-controller";
const COMPONENT: &str = "node-controller";
const QUEUE: &str = "node_lifecycle";
/// Where kubelets keep their heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// How often queued taints are tried (kube's NodeEvictionPeriod is 100 ms).
const TAINT_TICK: Duration = Duration::from_millis(500);
const WORKERS: usize = 4;

pub fn graces(settings: &Settings) -> Graces {
    Graces {
        monitor: settings.node_monitor_grace_period(),
        startup: settings.duration_of(&settings.node_startup_grace_period, Duration::from_secs(60)),
    }
}

pub fn rates(settings: &Settings) -> Rates {
    Rates {
        eviction_qps: settings.node_eviction_rate,
        secondary_qps: settings.secondary_node_eviction_rate,
        large_cluster_threshold: settings.large_cluster_size_threshold,
        unhealthy_zone_threshold: settings.unhealthy_zone_threshold,
    }
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, COMPONENT);
    let nodes = ctx.informers.get::<Node>();
    let leases = ctx
        .informers
        .get_namespaced::<Lease>(LEASE_NAMESPACE, InformerOptions::default());
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
    let queue = WorkQueue::<String>::new(QUEUE);
    let controller = Arc::new(Controller {
        nodes: nodes.store(),
        pods: pods.store(),
        client,
        recorder,
        health: Health::default(),
        zones: Mutex::new(Zones::default()),
        graces: graces(&ctx.settings),
        rates: rates(&ctx.settings),
        queue: Some(queue.clone()),
        known: Mutex::new(HashSet::new()),
    });
    let q = queue.clone();
    nodes.add_handler(move |event: &InformerEvent<Node>| q.add(event.key()));
    let c = controller.clone();
    leases.add_handler(move |event: &InformerEvent<Lease>| {
        let lease = event.object();
        let renewed = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref());
        if let (false, Some(renewed)) = (matches!(event, InformerEvent::Deleted(_)), renewed) {
            let name = lease.metadata.name.as_deref().unwrap_or_default();
            c.health.observe_lease(name, renewed.0, Utc::now());
        }
    });
    let (q, c) = (queue.clone(), controller.clone());
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        let newly_bound = match event {
            InformerEvent::Added(pod) => !crate::pods::node_name(pod).is_empty(),
            InformerEvent::Updated { old, new } => {
                crate::pods::node_name(old) != crate::pods::node_name(new)
            }
            InformerEvent::Deleted(_) => false,
        };
        if let Some(node) = newly_bound.then(|| c.needs_look(event.object())).flatten() {
            q.add(node);
        }
    });
    if !ctx.until_synced(&[&nodes, &leases, &pods]).await {
        return Ok(());
    }
    let period = ctx
        .settings
        .duration_of(&ctx.settings.node_monitor_period, Duration::from_secs(5));
    let ticker = tick(controller.clone(), period);
    let workers = ctx.serve(QUEUE, queue, WORKERS, controller);
    tokio::select! {
        _ = workers => {}
        _ = ticker => {}
    }
    Ok(())
}

/// Recounts zones every `period` and tries queued taints every tick.
async fn tick(controller: Arc<Controller>, period: Duration) {
    let mut recount = tokio::time::interval(period);
    let mut taint = tokio::time::interval(TAINT_TICK);
    loop {
        tokio::select! {
            _ = recount.tick() => controller.recount_zones().await,
            _ = taint.tick() => controller.taint_due().await,
        }
    }
}
