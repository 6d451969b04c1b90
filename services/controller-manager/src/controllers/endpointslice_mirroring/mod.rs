//! The EndpointSlice mirroring controller: a Service without a selector
//! has hand-written Endpoints; this controller mirrors them into
//! EndpointSlices (managed by `endpointslicemirroring-controller.k8s.io`,
//! owned by the Endpoints), so that consumers of slices see them too.
//!
//! Wiring: Endpoints, Services and EndpointSlices (indexed by Service). An
//! Endpoints' or Service's events enqueue their key; a mirrored slice's
//! enqueue its Endpoints unless the change was this controller's own.

mod desired;
pub mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::context::Context;
use crate::controllers::endpointslice::tracker::Tracker;
use crate::controllers::endpointslice::{on_slice_event, service_key, BY_SERVICE};
use crate::error::Result;
use sync::Syncer;

pub const ACCOUNT: &str = "endpointslicemirroring-controller";
const QUEUE: &str = "endpoint_slice_mirroring";
/// This controller's value of the managed-by label.
pub const CONTROLLER_NAME: &str = "endpointslicemirroring-controller.k8s.io";
/// The label that keeps an Endpoints from being mirrored.
pub const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Addresses mirrored per subset (`--mirroring-max-endpoints-per-subset`), and per slice.
pub const MAX_ENDPOINTS_PER_SUBSET: usize = 1000;

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let endpoints = ctx.informers.get::<Endpoints>();
    let services = ctx.informers.get::<Service>();
    let slices = ctx.informers.get::<EndpointSlice>();
    slices.add_index(BY_SERVICE, service_key);
    let queue = WorkQueue::<String>::new(QUEUE);
    let tracker = Arc::new(Tracker::default());
    let q = queue.clone();
    endpoints.add_handler(move |event: &InformerEvent<Endpoints>| q.add(event.key()));
    let q = queue.clone();
    services.add_handler(move |event: &InformerEvent<Service>| q.add(event.key()));
    let (q, t) = (queue.clone(), tracker.clone());
    slices.add_handler(move |event: &InformerEvent<EndpointSlice>| {
        on_slice_event(event, CONTROLLER_NAME, &t, &q)
    });
    if !ctx.until_synced(&[&endpoints, &services, &slices]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        services: services.store(),
        endpoints: endpoints.store(),
        slices: slices.store(),
        client,
        recorder,
        tracker,
    });
    let workers = ctx.settings.concurrent_service_endpoint_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
