//! The garbage collector: deletes objects whose owners are gone, and
//! carries out foreground and orphan deletions.
//!
//! Wiring: discovery finds every type that can be listed, watched and
//! deleted (again whenever a CustomResourceDefinition changes, and every
//! [`REDISCOVER`] for aggregated APIs, so custom resources are followed
//! too), and a metadata-only shared informer is started for each, indexed
//! by UID and by owner UID (`graph.rs`). Events enqueue UIDs, never a
//! scan: an object with owners or a deletion finalizer enqueues itself; a
//! deleted object enqueues its dependents (they may be orphans now) and
//! its deleting owners (they may be free to go now). Each key is handled
//! by `collect.rs`.

mod collect;
pub mod graph;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{InformerEvent, InformerOptions, Informers};
use capstan_client::queue::WorkQueue;
use kube::api::{ApiResource, DynamicObject};
use kube::discovery::{verbs, Discovery, Scope};
use tokio::sync::Notify;

use crate::context::Context;
use crate::error::Result;
use collect::{Collector, FOREGROUND, ORPHAN};
use graph::{Graph, Type, BY_OWNER, BY_UID};

pub const ACCOUNT: &str = "generic-garbage-collector";
const QUEUE: &str = "garbage_collector_attempt_to_delete";
/// How often served types are looked up again.
const REDISCOVER: Duration = Duration::from_secs(30);
/// After a CustomResourceDefinition changes, how long to let more changes
/// (its Established condition) arrive before discovery runs.
const SETTLE: Duration = Duration::from_millis(200);

/// Types the collector leaves alone, as kube's does: events churn and
/// never own anything.
const IGNORED: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    // Only the metadata the collector reads is kept (identity, owners,
    // finalizers, deletion): a second copy of every object, or even of
    // every pod's labels, would cost the caches tens of megabytes.
    ctx.informers
        .set_transform::<DynamicObject>(|object: &mut DynamicObject| {
            object.data = serde_json::Value::Null;
            object.metadata.labels = None;
            object.metadata.annotations = None;
            object.metadata.generate_name = None;
        });
    let graph = Graph::default();
    let queue = WorkQueue::<String>::new(QUEUE);
    let discovered = discover(&ctx, &graph, &queue).await?;
    for kind in &discovered {
        tokio::select! {
            _ = ctx.stop.cancelled() => return Ok(()),
            _ = wait_synced(&ctx.informers, kind) => {}
        }
    }
    let types_changed = Arc::new(Notify::new());
    watch_definitions(&ctx.informers, &types_changed);
    let rediscovery = rediscover(ctx.clone(), graph.clone(), queue.clone(), types_changed);
    tokio::spawn(rediscovery);
    let collector = Arc::new(Collector {
        graph,
        client,
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_gc_syncs;
    ctx.serve(QUEUE, queue, workers, collector).await;
    Ok(())
}

async fn wait_synced(informers: &Informers, kind: &Type) {
    informers
        .get_dynamic(&kind.resource, None, InformerOptions::default())
        .wait_synced()
        .await;
}

/// Starts an informer for every type not yet watched; returns the new ones.
async fn discover(ctx: &Context, graph: &Graph, queue: &WorkQueue<String>) -> Result<Vec<Type>> {
    let discovery = Discovery::new(ctx.clients.root()).run().await?;
    let mut added = Vec::new();
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            let usable = [verbs::LIST, verbs::WATCH, verbs::DELETE]
                .iter()
                .all(|v| capabilities.supports_operation(v));
            let ignored = IGNORED.contains(&(resource.group.as_str(), resource.plural.as_str()));
            if !usable || ignored || graph.has(&resource) {
                continue;
            }
            let kind = watch(
                ctx,
                &resource,
                capabilities.scope == Scope::Namespaced,
                graph,
                queue,
            );
            graph.add(kind.clone());
            added.push(kind);
        }
    }
    Ok(added)
}

fn watch(
    ctx: &Context,
    resource: &ApiResource,
    namespaced: bool,
    graph: &Graph,
    queue: &WorkQueue<String>,
) -> Type {
    let informer = ctx
        .informers
        .get_dynamic(resource, None, InformerOptions::default());
    informer.add_index(BY_UID, graph::uid_index);
    informer.add_index(BY_OWNER, graph::owner_index);
    let (graph, queue) = (graph.clone(), queue.clone());
    informer
        .add_handler(move |event: &InformerEvent<DynamicObject>| enqueue(&graph, &queue, event));
    Type {
        resource: resource.clone(),
        namespaced,
        store: informer.store(),
    }
}

/// Tells `changed` whenever a CustomResourceDefinition is added or
/// changes: a new type may be served (kube's collector waits for its next
/// 30-second resync; objects of a new kind would wait as long for
/// collection).
fn watch_definitions(informers: &Informers, changed: &Arc<Notify>) {
    let definitions = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let changed = changed.clone();
    informers
        .get_dynamic(&definitions, None, InformerOptions::default())
        .add_handler(move |event: &InformerEvent<DynamicObject>| {
            if !matches!(event, InformerEvent::Deleted(_)) {
                changed.notify_one();
            }
        });
}

/// Rediscovers when definitions change and now and then, so types added
/// later (CRDs, aggregated APIs) are collected too.
async fn rediscover(
    ctx: Arc<Context>,
    graph: Graph,
    queue: WorkQueue<String>,
    types_changed: Arc<Notify>,
) {
    loop {
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = tokio::time::sleep(REDISCOVER) => {}
            _ = types_changed.notified() => tokio::time::sleep(SETTLE).await,
        }
        if let Err(err) = discover(&ctx, &graph, &queue).await {
            tracing::debug!(%err, "garbage collector: discovery failed; next time");
        }
    }
}

fn needs_look(object: &DynamicObject) -> bool {
    let has_owners = object
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|r| !r.is_empty());
    let finalizers = object.metadata.finalizers.iter().flatten();
    let held = finalizers
        .into_iter()
        .any(|f| f == ORPHAN || f == FOREGROUND);
    has_owners || (object.metadata.deletion_timestamp.is_some() && held)
}

/// Owners of `object` that are being deleted and may be waiting on it.
fn deleting_owners(graph: &Graph, object: &DynamicObject) -> Vec<String> {
    let references = object.metadata.owner_references.iter().flatten();
    references
        .filter_map(|r| graph.by_uid(&r.uid))
        .filter(|o| o.object.metadata.deletion_timestamp.is_some())
        .filter_map(|o| o.object.metadata.uid.clone())
        .collect()
}

fn enqueue(graph: &Graph, queue: &WorkQueue<String>, event: &InformerEvent<DynamicObject>) {
    let object = event.object();
    let uid = object.metadata.uid.clone().unwrap_or_default();
    match event {
        InformerEvent::Added(_) | InformerEvent::Updated { .. } => {
            if needs_look(object) {
                queue.add(uid.clone());
            }
        }
        InformerEvent::Deleted(_) => {
            for dependent in graph.dependents(&uid) {
                if let Some(uid) = dependent.object.metadata.uid.clone() {
                    queue.add(uid);
                }
            }
        }
    }
    for owner in deleting_owners(graph, object) {
        queue.add(owner);
    }
    if let InformerEvent::Updated { old, .. } = event {
        for owner in deleting_owners(graph, old) {
            queue.add(owner);
        }
    }
}
