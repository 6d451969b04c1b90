//! The ReplicaSet controller and the replication manager (one
//! implementation over both types): keeps each object's pod count.
//!
//! Wiring: the owners' informer (indexed by their own controller, to find
//! a Deployment's sibling ReplicaSets) and the shared pods' informer
//! (indexed by controller UID and, for orphans, by namespace). Owner
//! events enqueue the owner; pod events lower its expectations and
//! enqueue it (or, for an orphan, every owner whose selector matches).

mod events;
pub mod kind;
pub mod status;
pub mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};

use crate::context::Context;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::ownership::{self, BY_CONTROLLER, ORPHANS};
use crate::pod_control::PodControl;
use kind::Replicated;
use sync::Syncer;

pub async fn run_replica_sets(ctx: Arc<Context>) -> Result<()> {
    run::<ReplicaSet>(ctx).await
}

pub async fn run_replication_controllers(ctx: Arc<Context>) -> Result<()> {
    run::<ReplicationController>(ctx).await
}

/// Registers the pod indexes every pod-owning controller uses.
pub fn index_pods(ctx: &Context) -> capstan_client::informer::Informer<Pod> {
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(BY_CONTROLLER, ownership::by_controller_uid::<Pod>);
    pods.add_index(ORPHANS, ownership::orphans_by_namespace::<Pod>);
    pods
}

async fn run<K: Replicated>(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(K::ACCOUNT).await?;
    let recorder = ctx.recorder(&client, K::ACCOUNT);
    let owners = ctx.informers.get::<K>();
    owners.add_index(BY_CONTROLLER, ownership::by_controller_uid::<K>);
    let pods = index_pods(&ctx);
    let queue = WorkQueue::<String>::new(K::QUEUE);
    let expectations = Expectations::new();
    let (q, e) = (queue.clone(), expectations.clone());
    owners.add_handler(move |event: &InformerEvent<K>| {
        if let InformerEvent::Deleted(_) = event {
            e.forget(&event.key());
        }
        q.add(event.key());
    });
    let pod_events = events::PodEvents {
        owners: owners.store(),
        expectations: expectations.clone(),
        queue: queue.clone(),
    };
    pods.add_handler(move |event: &InformerEvent<Pod>| pod_events.handle(event));
    if !ctx.until_synced(&[&owners, &pods]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        owners: owners.store(),
        pods: pods.store(),
        expectations,
        control: PodControl::new(client, recorder),
        queue: Some(queue.clone()),
    });
    let workers = K::workers(&ctx.settings);
    ctx.serve(K::QUEUE, queue, workers, syncer).await;
    Ok(())
}
