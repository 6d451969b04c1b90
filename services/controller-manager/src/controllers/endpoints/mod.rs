//! The endpoints controller: each Service with a selector gets an
//! Endpoints object of the same name listing its pods' addresses (ready
//! and not ready) and ports.
//!
//! Wiring: Services, pods and Endpoints. A Service's events enqueue it; a
//! pod's enqueue the Services that select it (before and after a label
//! change) when something published changed; an Endpoints' deletion
//! enqueues its Service, which writes it again. At start every cached
//! Endpoints is enqueued once, so ones whose Service went while no
//! controller ran are deleted.

pub mod selection;
pub mod subsets;
pub mod sync;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use capstan_client::informer::{key_of, InformerEvent};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};

use crate::context::Context;
use crate::error::Result;
use sync::Syncer;

pub const ACCOUNT: &str = "endpoint-controller";
const QUEUE: &str = "endpoint";
/// Endpoints holding a leader-election record are not a Service's.
pub const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let endpoints = ctx.informers.get::<Endpoints>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    services.add_handler(move |event: &InformerEvent<Service>| q.add(event.key()));
    let (q, store) = (queue.clone(), services.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        for key in selection::services_for_pod_event(&store, event) {
            q.add(key);
        }
    });
    let q = queue.clone();
    endpoints.add_handler(move |event: &InformerEvent<Endpoints>| {
        if let InformerEvent::Deleted(_) = event {
            q.add(event.key());
        }
    });
    if !ctx.until_synced(&[&services, &pods, &endpoints]).await {
        return Ok(());
    }
    for leftover in endpoints.store().list() {
        let annotations = leftover.metadata.annotations.as_ref();
        if !annotations.is_some_and(|a| a.contains_key(LEADER_ANNOTATION)) {
            queue.add(key_of(leftover.as_ref()));
        }
    }
    let syncer = Arc::new(Syncer {
        services: services.store(),
        pods: pods.store(),
        endpoints: endpoints.store(),
        client,
        recorder,
    });
    let workers = ctx.settings.concurrent_endpoint_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
