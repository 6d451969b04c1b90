//! The EndpointSlice controller: each Service with a selector gets
//! EndpointSlices (`discovery.k8s.io/v1`) carrying its pods' endpoints, at
//! most `--max-endpoints-per-slice` each, grouped by address type and
//! port set, labelled `kubernetes.io/service-name` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`,
//! owned by the Service.
//!
//! Wiring: Services, pods, nodes (for zones) and EndpointSlices (indexed
//! by their Service). A Service's events enqueue it; a pod's enqueue the
//! Services selecting it when a published part changed; a slice's enqueue
//! its Service unless the change was this controller's own write.

mod desired;
pub mod reconcile;
pub mod sync;
#[cfg(test)]
mod tests;
pub mod tracker;

use std::sync::Arc;

use capstan_client::informer::{key_from, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::context::Context;
use crate::controllers::endpoints::selection;
use crate::error::Result;
use sync::Syncer;
use tracker::Tracker;

pub const ACCOUNT: &str = "endpointslice-controller";
const QUEUE: &str = "endpoint_slice";
/// The label naming the Service a slice belongs to.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming the controller that manages a slice.
pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY`].
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The index of slices by their Service's key.
pub const BY_SERVICE: &str = "service-key";

/// Index function: the `namespace/name` of the slice's Service.
pub fn service_key(slice: &EndpointSlice) -> Vec<String> {
    let labels = slice.metadata.labels.as_ref();
    let name = labels
        .and_then(|l| l.get(SERVICE_NAME))
        .filter(|n| !n.is_empty());
    name.map(|n| key_from(slice.metadata.namespace.as_deref(), n))
        .into_iter()
        .collect()
}

/// Who manages the slice (its [`MANAGED_BY`] label).
pub fn managed_by(slice: &EndpointSlice) -> &str {
    let labels = slice.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(MANAGED_BY))
        .map_or("", String::as_str)
}

/// The cached slices of the Service `key` that `manager` manages.
pub fn owned_slices(
    slices: &Store<EndpointSlice>,
    key: &str,
    manager: &str,
) -> Vec<Arc<EndpointSlice>> {
    slices
        .by_index(BY_SERVICE, key)
        .into_iter()
        .filter(|s| managed_by(s) == manager)
        .collect()
}

/// Enqueues the owner of a slice managed by `manager` when the change
/// was not the controller's own write.
pub fn on_slice_event(
    event: &InformerEvent<EndpointSlice>,
    manager: &str,
    tracker: &Tracker,
    queue: &WorkQueue<String>,
) {
    let slice = event.object();
    if let InformerEvent::Updated { old, .. } = event {
        // A slice taken from this controller (relabelled) is looked at too.
        let moved = managed_by(old) == manager
            && (managed_by(slice) != manager || service_key(old) != service_key(slice));
        if moved {
            service_key(old)
                .into_iter()
                .for_each(|owner| queue.add(owner));
        }
    }
    if managed_by(slice) != manager {
        return;
    }
    let deleted = matches!(event, InformerEvent::Deleted(_));
    for owner in service_key(slice) {
        if !tracker.observe(&owner, slice, deleted) {
            queue.add(owner);
        }
    }
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    let slices = ctx.informers.get::<EndpointSlice>();
    slices.add_index(BY_SERVICE, service_key);
    let queue = WorkQueue::<String>::new(QUEUE);
    let tracker = Arc::new(Tracker::default());
    let q = queue.clone();
    services.add_handler(move |event: &InformerEvent<Service>| q.add(event.key()));
    let (q, store) = (queue.clone(), services.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        for key in selection::services_for_pod_event(&store, event) {
            q.add(key);
        }
    });
    let (q, t) = (queue.clone(), tracker.clone());
    slices.add_handler(move |event: &InformerEvent<EndpointSlice>| {
        on_slice_event(event, CONTROLLER_NAME, &t, &q)
    });
    if !ctx.until_synced(&[&services, &pods, &nodes, &slices]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        services: services.store(),
        pods: pods.store(),
        nodes: nodes.store(),
        slices: slices.store(),
        client,
        recorder,
        tracker,
        max_per_slice: ctx.settings.max_endpoints_per_slice.max(1) as usize,
    });
    let workers = ctx.settings.concurrent_service_endpoint_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
