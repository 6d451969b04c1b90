//! The StatefulSet controller: pods with stable names and storage, made
//! and replaced in ordinal order (or in parallel), rolled to a new
//! template by RollingUpdate (partition, maxUnavailable) or left for the
//! user under OnDelete, with ControllerRevisions as history for `kubectl
//! rollout status|history|undo`.
//!
//! Wiring: StatefulSets; pods (by controller UID, orphans by namespace)
//! whose events lower the set's expectations and queue it; revisions
//! (the same indexes) whose changes queue their set; claims, read from
//! their cache before one is made.

mod control;
pub mod identity;
pub mod plan;
pub mod revisions;
pub mod status;
pub mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::context::Context;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::history::History;
use crate::pod_events::PodEvents;
use control::SetControl;
use sync::{selector_of, Syncer};

pub const ACCOUNT: &str = "statefulset-controller";
const QUEUE: &str = "statefulset";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let sets = ctx.informers.get::<StatefulSet>();
    let pods = super::replicaset::index_pods(&ctx);
    let revisions = ctx.informers.get::<ControllerRevision>();
    History::index(&revisions);
    let claims = ctx.informers.get::<PersistentVolumeClaim>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let expectations = Expectations::new();
    let (q, e) = (queue.clone(), expectations.clone());
    sets.add_handler(move |event: &InformerEvent<StatefulSet>| {
        if let InformerEvent::Deleted(_) = event {
            e.forget(&event.key());
        }
        q.add(event.key());
    });
    let pod_events = PodEvents {
        owners: sets.store(),
        selector: |set: &StatefulSet| selector_of(set).ok(),
        expectations: expectations.clone(),
        queue: queue.clone(),
    };
    pods.add_handler(move |event: &InformerEvent<Pod>| pod_events.handle(event));
    History::queue_owners(&revisions, "StatefulSet", queue.clone());
    if !ctx.until_synced(&[&sets, &pods, &revisions, &claims]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        sets: sets.store(),
        pods: pods.store(),
        history: History {
            revisions: revisions.store(),
            client: client.clone(),
        },
        expectations,
        control: SetControl {
            client,
            recorder,
            claims: claims.store(),
        },
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_statefulset_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
