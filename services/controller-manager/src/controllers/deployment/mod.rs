//! The deployment controller: one ReplicaSet per pod template, rolled out
//! by the deployment's strategy, with the revision history and status
//! `kubectl rollout status|history|undo|pause|resume|restart` and `kubectl
//! scale` rely on.
//!
//! Wiring: deployments, ReplicaSets (indexed by controller UID and, for
//! orphans, by namespace) and pods (to see a Recreate's old pods go). A
//! deployment's events enqueue it; a ReplicaSet's enqueue its deployment
//! (or, for an orphan, every deployment whose selector matches); a pod's
//! deletion enqueues the deployment that owns its ReplicaSet.

pub mod conditions;
mod events;
pub mod progress;
mod recreate;
mod rolling;
mod scale;
pub mod sync;
#[cfg(test)]
mod tests;
pub mod util;

use std::sync::Arc;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;

use crate::context::Context;
use crate::error::Result;
use crate::ownership::{self, BY_CONTROLLER, ORPHANS};
use sync::Syncer;

pub const ACCOUNT: &str = "deployment-controller";
const QUEUE: &str = "deployment";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let deployments = ctx.informers.get::<Deployment>();
    let replica_sets = ctx.informers.get::<ReplicaSet>();
    replica_sets.add_index(BY_CONTROLLER, ownership::by_controller_uid::<ReplicaSet>);
    replica_sets.add_index(ORPHANS, ownership::orphans_by_namespace::<ReplicaSet>);
    let pods = super::replicaset::index_pods(&ctx);
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    deployments.add_handler(move |event: &InformerEvent<Deployment>| q.add(event.key()));
    let handler = events::Handler {
        deployments: deployments.store(),
        replica_sets: replica_sets.store(),
        queue: queue.clone(),
    };
    let for_pods = handler.clone();
    replica_sets.add_handler(move |event: &InformerEvent<ReplicaSet>| handler.replica_set(event));
    pods.add_handler(move |event: &InformerEvent<Pod>| for_pods.pod(event));
    if !ctx
        .until_synced(&[&deployments, &replica_sets, &pods])
        .await
    {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        deployments: deployments.store(),
        replica_sets: replica_sets.store(),
        pods: pods.store(),
        client,
        recorder,
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_deployment_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
