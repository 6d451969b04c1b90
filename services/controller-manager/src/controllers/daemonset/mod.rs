//! The DaemonSet controller: one pod on every node that should run it
//! (nodeSelector, node affinity, taints against the template's
//! tolerations and those kube adds to daemon pods), placed by the
//! scheduler through a node affinity on the node's name; a new template
//! rolled out by RollingUpdate (maxUnavailable, maxSurge) or left for the
//! user under OnDelete, with ControllerRevisions as history.
//!
//! Wiring: DaemonSets; nodes (a node added, removed, relabelled or
//! retainted queues every DaemonSet); pods (by controller UID, orphans by
//! namespace) whose events lower the set's expectations and queue it;
//! revisions whose changes queue their DaemonSet.

pub mod eligibility;
pub mod plan;
pub mod revisions;
pub mod status;
pub mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::{InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::context::Context;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::history::History;
use crate::pod_control::PodControl;
use crate::pod_events::PodEvents;
use sync::{selector_of, Syncer};

pub const ACCOUNT: &str = "daemon-set-controller";
const QUEUE: &str = "daemonset";

/// Whether a node change can change which DaemonSets belong on it.
fn node_changed(event: &InformerEvent<Node>) -> bool {
    match event {
        InformerEvent::Updated { old, new } => {
            old.metadata.labels != new.metadata.labels
                || old.spec.as_ref().map(|s| &s.taints) != new.spec.as_ref().map(|s| &s.taints)
        }
        _ => true,
    }
}

fn queue_all(daemon_sets: &Store<DaemonSet>, queue: &WorkQueue<String>) {
    for key in daemon_sets.keys() {
        queue.add(key);
    }
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let daemon_sets = ctx.informers.get::<DaemonSet>();
    let nodes = ctx.informers.get::<Node>();
    let pods = super::replicaset::index_pods(&ctx);
    let revisions = ctx.informers.get::<ControllerRevision>();
    History::index(&revisions);
    let queue = WorkQueue::<String>::new(QUEUE);
    let expectations = Expectations::new();
    let (q, e) = (queue.clone(), expectations.clone());
    daemon_sets.add_handler(move |event: &InformerEvent<DaemonSet>| {
        if let InformerEvent::Deleted(_) = event {
            e.forget(&event.key());
        }
        q.add(event.key());
    });
    let (q, store) = (queue.clone(), daemon_sets.store());
    nodes.add_handler(move |event: &InformerEvent<Node>| {
        if node_changed(event) {
            queue_all(&store, &q);
        }
    });
    let pod_events = PodEvents {
        owners: daemon_sets.store(),
        selector: |ds: &DaemonSet| selector_of(ds).ok(),
        expectations: expectations.clone(),
        queue: queue.clone(),
    };
    pods.add_handler(move |event: &InformerEvent<Pod>| pod_events.handle(event));
    History::queue_owners(&revisions, "DaemonSet", queue.clone());
    if !ctx
        .until_synced(&[&daemon_sets, &nodes, &pods, &revisions])
        .await
    {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        daemon_sets: daemon_sets.store(),
        nodes: nodes.store(),
        pods: pods.store(),
        history: History {
            revisions: revisions.store(),
            client: client.clone(),
        },
        expectations,
        control: PodControl::new(client, recorder),
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_daemonset_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
