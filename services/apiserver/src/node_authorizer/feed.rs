//! Keeps the graph current: one list of pods and of PersistentVolumes,
//! then their watches from the registry's own watch caches, listing
//! again whenever a watch ends. The first lists are in the graph before
//! the server answers, so a node is never refused for a pod bound before
//! start.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;

use super::graph::Graph;
use crate::cache::EventType;
use crate::error::ApiError;
use crate::rbac::informer::{list_resource, watch_resource};
use crate::registry::Catalog;

const RETRY: Duration = Duration::from_millis(200);

/// The kinds the graph is built from.
#[derive(Clone, Copy, Debug)]
enum Source {
    Pods,
    Volumes,
}

impl Source {
    const ALL: [Source; 2] = [Source::Pods, Source::Volumes];

    fn resource(self) -> &'static str {
        match self {
            Source::Pods => "pods",
            Source::Volumes => "persistentvolumes",
        }
    }

    fn put(self, graph: &mut Graph, object: &Value) {
        match self {
            Source::Pods => graph.put_pod(object),
            Source::Volumes => graph.put_volume(object),
        }
    }

    fn remove(self, graph: &mut Graph, object: &Value) {
        match self {
            Source::Pods => graph.remove_pod(object),
            Source::Volumes => graph.remove_volume(object),
        }
    }

    fn replace(self, graph: &mut Graph, objects: &[Arc<Value>]) {
        match self {
            Source::Pods => graph.replace_pods(objects),
            Source::Volumes => graph.replace_volumes(objects),
        }
    }
}

pub type SharedGraph = Arc<RwLock<Graph>>;

/// Lists the sources into a new graph, then follows them. Must run inside
/// the actix system that runs the catalog's actors.
pub async fn start(catalog: Arc<Catalog>) -> Result<SharedGraph, ApiError> {
    let graph = SharedGraph::default();
    for source in Source::ALL {
        let revision = relist(&catalog, &graph, source).await?;
        actix_rt::spawn(follow(catalog.clone(), graph.clone(), source, revision));
    }
    Ok(graph)
}

async fn relist(catalog: &Catalog, graph: &SharedGraph, source: Source) -> Result<i64, ApiError> {
    let (items, revision) = list_resource(catalog, "", "v1", source.resource()).await?;
    source.replace(&mut write(graph), &items);
    Ok(revision)
}

fn write(graph: &SharedGraph) -> std::sync::RwLockWriteGuard<'_, Graph> {
    graph.write().unwrap_or_else(|e| e.into_inner())
}

/// Follows one source from `revision`; when its watch ends, lists again.
async fn follow(catalog: Arc<Catalog>, graph: SharedGraph, source: Source, mut revision: i64) {
    let resource = source.resource();
    loop {
        match watch_resource(&catalog, "", "v1", resource, revision).await {
            Ok(mut items) => {
                while let Some(item) = items.recv().await {
                    match item.kind {
                        EventType::Added | EventType::Modified => {
                            source.put(&mut write(&graph), &item.object.value())
                        }
                        EventType::Deleted => {
                            source.remove(&mut write(&graph), &item.object.value())
                        }
                        EventType::Bookmark => {}
                        EventType::Error => break,
                    }
                }
            }
            Err(err) => tracing::warn!(resource, %err, "node authorizer: watch failed"),
        }
        loop {
            tokio::time::sleep(RETRY).await;
            match relist(&catalog, &graph, source).await {
                Ok(at) => {
                    revision = at;
                    break;
                }
                Err(err) => tracing::warn!(resource, %err, "node authorizer: list failed"),
            }
        }
    }
}
