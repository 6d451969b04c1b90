//! The pod garbage collector (kube's podgc): terminated pods past
//! `--terminated-pod-gc-threshold` are deleted, evicted and oldest first;
//! pods bound to a node that no longer exists are marked Failed (with the
//! DisruptionTarget condition) and deleted once the node has been missing
//! for a quarantine and the API confirms it is gone (the cache may only
//! lag); pods being deleted that were never scheduled are deleted at once
//! (no kubelet will finish them).
//!
//! Wiring: pods (indexed by node and by being terminated) and nodes. kube
//! passes over every pod every 20 s; here a pod that ends queues one
//! coalesced count of the terminated, a pod on a missing node (or the
//! pods of a node deleted) are queued for the end of the quarantine, and
//! a pod that starts terminating unscheduled is queued at once.

pub mod orphans;
pub mod sync;
mod terminated;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{indexes, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::context::Context;
use crate::error::Result;
use crate::pods;
pub use sync::Collector;

pub const ACCOUNT: &str = "pod-garbage-collector";
const QUEUE: &str = "pod_garbage_collector";
const WORKERS: usize = 4;
/// How long a node must have been missing before its pods go (kube's).
pub const QUARANTINE: Duration = Duration::from_secs(40);
/// The terminated pods are counted at most this often: a burst of pods
/// ending costs one count.
const COUNT_DELAY: Duration = Duration::from_secs(1);

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
    pods.add_index(terminated::INDEX, terminated::index);
    let queue = WorkQueue::<String>::new(QUEUE);
    let collector = Arc::new(Collector {
        pods: pods.store(),
        nodes: nodes.store(),
        client,
        threshold: ctx.settings.terminated_pod_gc_threshold,
        quarantine_period: QUARANTINE,
        queue: Some(queue.clone()),
        quarantine: Default::default(),
    });
    let (q, pod_store, c) = (queue.clone(), pods.store(), collector.clone());
    nodes.add_handler(move |event: &InformerEvent<Node>| on_node(event, &pod_store, &c, &q));
    let (q, node_store) = (queue.clone(), nodes.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| on_pod(event, &node_store, &q));
    if !ctx.until_synced(&[&nodes, &pods]).await {
        return Ok(());
    }
    ctx.serve(QUEUE, queue, WORKERS, collector).await;
    Ok(())
}

fn on_node(
    event: &InformerEvent<Node>,
    pods: &Store<Pod>,
    collector: &Collector,
    queue: &WorkQueue<String>,
) {
    let name = event.object().metadata.name.as_deref().unwrap_or_default();
    match event {
        InformerEvent::Deleted(_) => {
            for key in pods.keys_by_index(indexes::BY_NODE_NAME, name) {
                queue.add_after(key, QUARANTINE);
            }
        }
        _ => collector.node_seen(name),
    }
}

fn on_pod(event: &InformerEvent<Pod>, nodes: &Store<Node>, queue: &WorkQueue<String>) {
    if matches!(event, InformerEvent::Deleted(_)) {
        return;
    }
    let pod = event.object();
    if terminated::is_terminated(pod) {
        queue.add_after(sync::COUNT_KEY.to_string(), COUNT_DELAY);
    }
    let node = pods::node_name(pod);
    if node.is_empty() {
        if pods::is_terminating(pod) {
            queue.add(event.key());
        }
    } else if nodes.get(None, node).is_none() {
        queue.add_after(event.key(), QUARANTINE);
    }
}
