//! Keeps the RBAC objects and their index current: one list, then one
//! watch per kind from the registry's own watch caches (the resource
//! actors), re-listing when a watch ends. Every batch of changes builds a
//! new [`Snapshot`] and publishes it; decisions read the latest one
//! without waiting for anything.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::index::Index;
use super::objects::{Kind, Objects, GROUP, VERSION};
use crate::cache::{EventType, WatchItem};
use crate::error::ApiError;
use crate::registry::options::ListOptions;
use crate::registry::Catalog;
use crate::registry::{actor, requests};

/// The pause before a list is tried again after a failure.
const RETRY: Duration = Duration::from_millis(200);

/// The RBAC objects at one moment, and the index built from them.
pub struct Snapshot {
    pub objects: Objects,
    pub index: Index,
}

impl Snapshot {
    pub fn of(objects: Objects) -> Snapshot {
        let index = Index::build(&objects);
        Snapshot { objects, index }
    }
}

/// Where the latest snapshot is read.
pub type Shared = watch::Receiver<Arc<Snapshot>>;

enum Change {
    Replace(Kind, Vec<Arc<Value>>),
    Put(Kind, Arc<Value>),
    Remove(Kind, Arc<Value>),
}

/// Lists every RBAC kind (so the first snapshot is complete before the
/// server serves), then follows their watches. Must run inside the actix
/// system that runs the catalog's actors.
pub async fn start(catalog: Arc<Catalog>) -> Result<Shared, ApiError> {
    let mut objects = Objects::default();
    let mut revisions = Vec::new();
    for kind in Kind::ALL {
        let (items, revision) = list(&catalog, kind).await?;
        objects.replace(kind, items);
        revisions.push((kind, revision));
    }
    let (publish, shared) = watch::channel(Arc::new(Snapshot::of(objects.clone())));
    let (changes, incoming) = mpsc::unbounded_channel();
    for (kind, revision) in revisions {
        actix_rt::spawn(follow(catalog.clone(), kind, revision, changes.clone()));
    }
    actix_rt::spawn(apply(objects, incoming, publish));
    Ok(shared)
}

/// Applies changes as they come, publishing one snapshot per batch.
async fn apply(
    mut objects: Objects,
    mut incoming: mpsc::UnboundedReceiver<Change>,
    publish: watch::Sender<Arc<Snapshot>>,
) {
    while let Some(change) = incoming.recv().await {
        let mut change = Some(change);
        while let Some(next) = change {
            match next {
                Change::Replace(kind, items) => objects.replace(kind, items),
                Change::Put(kind, obj) => objects.put(kind, obj),
                Change::Remove(kind, obj) => objects.remove(kind, &obj),
            }
            change = incoming.try_recv().ok();
        }
        publish.send_replace(Arc::new(Snapshot::of(objects.clone())));
    }
}

/// Follows one kind's watch from `revision`; when it ends (the cache
/// re-listed, or cut a slow watcher off), lists again and goes on.
async fn follow(
    catalog: Arc<Catalog>,
    kind: Kind,
    mut revision: i64,
    changes: mpsc::UnboundedSender<Change>,
) {
    loop {
        match open(&catalog, kind, revision).await {
            Ok(mut items) => {
                while let Some(item) = items.recv().await {
                    let Ok(change) = change_of(kind, item, &mut revision) else {
                        break;
                    };
                    if change.is_some_and(|c| changes.send(c).is_err()) {
                        return;
                    }
                }
            }
            Err(err) => tracing::warn!(resource = kind.resource(), %err, "RBAC watch failed"),
        }
        loop {
            tokio::time::sleep(RETRY).await;
            match list(&catalog, kind).await {
                Ok((items, at)) => {
                    revision = at;
                    if changes.send(Change::Replace(kind, items)).is_err() {
                        return;
                    }
                    break;
                }
                Err(err) => tracing::warn!(resource = kind.resource(), %err, "RBAC list failed"),
            }
        }
    }
}

/// The change a watch item makes: `Err` when the watch must start over,
/// `Ok(None)` for a bookmark.
fn change_of(kind: Kind, item: WatchItem, revision: &mut i64) -> Result<Option<Change>, ()> {
    if item.object.revision() > 0 {
        *revision = item.object.revision();
    }
    match item.kind {
        EventType::Added | EventType::Modified => {
            Ok(Some(Change::Put(kind, Arc::new(item.object.value()))))
        }
        EventType::Deleted => Ok(Some(Change::Remove(kind, Arc::new(item.object.value())))),
        EventType::Bookmark => Ok(None),
        EventType::Error => Err(()),
    }
}

/// Every object of a served resource across namespaces, and the revision
/// of the list (from the resource's watch cache).
pub async fn list_resource(
    catalog: &Catalog,
    group: &str,
    version: &str,
    resource: &str,
) -> Result<(Vec<Arc<Value>>, i64), ApiError> {
    let message = requests::List {
        namespace: None,
        options: ListOptions::default(),
    };
    let page = entry(catalog, group, version, resource)?
        .call(message)
        .await?;
    let items = page.items.iter().map(|o| Arc::new(o.value())).collect();
    Ok((items, page.revision))
}

/// The changes to a served resource across namespaces after `revision`.
pub async fn watch_resource(
    catalog: &Catalog,
    group: &str,
    version: &str,
    resource: &str,
    revision: i64,
) -> Result<mpsc::Receiver<WatchItem>, ApiError> {
    let options = ListOptions {
        resource_version: Some(revision.to_string()),
        watch: true,
        ..ListOptions::default()
    };
    let message = actor::Watch {
        namespace: None,
        options,
    };
    entry(catalog, group, version, resource)?
        .actor
        .send(message)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
}

fn entry<'a>(
    catalog: &'a Catalog,
    group: &str,
    version: &str,
    resource: &str,
) -> Result<&'a crate::registry::catalog::Entry, ApiError> {
    catalog
        .find(group, version, resource)
        .ok_or_else(|| ApiError::Internal(format!("{resource} are not served")))
}

async fn list(catalog: &Catalog, kind: Kind) -> Result<(Vec<Arc<Value>>, i64), ApiError> {
    list_resource(catalog, GROUP, VERSION, kind.resource()).await
}

async fn open(
    catalog: &Catalog,
    kind: Kind,
    revision: i64,
) -> Result<mpsc::Receiver<WatchItem>, ApiError> {
    watch_resource(catalog, GROUP, VERSION, kind.resource(), revision).await
}
