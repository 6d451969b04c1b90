//! How the Cacher is filled and kept current: a list of its prefix, then
//! one store watch from just after that list's revision. A watch that
//! breaks (its store member went, the store restarted) is opened again
//! just after the cache's revision, so the cache's watchers miss nothing
//! and see nothing twice; when that history is gone (compacted), the
//! cache starts over from a new list, and its watchers are closed, as
//! they cannot be told what they missed (their clients re-list).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::cacher::{Cacher, WINDOW};
use super::unreadable::Unreadable;
use super::watch_cache::{Event, EventType, WatchCache, WatchItem, Watcher};
use crate::storage::{
    Change, Earlier, EventStream, FieldPaths, Interface, ListRequest, Object, StorageError,
    StoreEvent, Stored,
};

/// The pause before a lost store watch is opened again.
const RESYNC_PAUSE: Duration = Duration::from_millis(200);

impl Cacher {
    /// A Cacher of `prefix` in front of `store`, filled from a list, and
    /// the future that keeps it current (its owner runs it; the cache
    /// stops following the store when it is dropped).
    pub async fn start(
        store: Arc<dyn Interface>,
        prefix: String,
        fields: FieldPaths,
    ) -> Result<(Arc<Cacher>, impl Future<Output = ()>), StorageError> {
        let (cache, stream) = prime(store.as_ref(), &prefix, fields).await?;
        let (revisions, _) = watch::channel(cache.revision());
        let cacher = Arc::new(Cacher {
            store,
            prefix,
            fields,
            cache: Mutex::new(cache),
            revisions,
        });
        let feed = cacher.clone().feed(stream);
        Ok((cacher, feed))
    }

    async fn feed(self: Arc<Self>, mut stream: EventStream) {
        loop {
            let relist = match stream.next().await {
                Some(Ok(events)) => {
                    self.apply(events);
                    continue;
                }
                Some(Err(err)) => {
                    tracing::warn!(prefix = self.prefix, %err, "store watch lost");
                    matches!(err, StorageError::Compacted { .. })
                }
                None => false,
            };
            stream = self.resync(relist).await;
        }
    }

    /// A new store watch after the cache's revision, or, when that history
    /// is gone, a new list and a watch after it; tried until one works.
    async fn resync(&self, mut relist: bool) -> EventStream {
        loop {
            tokio::time::sleep(RESYNC_PAUSE).await;
            let from = self.revision() + 1;
            if !relist {
                match self.store.watch(&self.prefix, from).await {
                    Ok(stream) => {
                        tracing::info!(prefix = self.prefix, from, "store watch resumed");
                        return stream;
                    }
                    Err(StorageError::Compacted { .. }) => relist = true,
                    Err(err) => {
                        tracing::warn!(prefix = self.prefix, %err, "store watch lost; retrying");
                        continue;
                    }
                }
            }
            match prime(self.store.as_ref(), &self.prefix, self.fields).await {
                Ok((cache, stream)) => {
                    let revision = cache.revision();
                    tracing::warn!(
                        prefix = self.prefix,
                        from,
                        revision,
                        "store history compacted; re-listed"
                    );
                    *self.cache() = cache;
                    self.revisions.send_replace(revision);
                    return stream;
                }
                Err(err) => tracing::warn!(prefix = self.prefix, %err, "re-list failed; retrying"),
            }
        }
    }

    /// Applies a batch of store events (one revision's, or more).
    pub(super) fn apply(&self, events: Vec<StoreEvent>) {
        let mut cache = self.cache();
        // The watch resumes just after the cache's revision; anything at
        // or before it is already in (every event of one revision comes in
        // one batch, so comparing with the revision before it is safe).
        let seen = cache.revision();
        for event in events.into_iter().filter(|e| e.revision > seen) {
            if let Some(err) = event.unreadable {
                cache.set_unreadable(&event.key, err, event.revision);
                continue;
            }
            if event.change == Change::Deleted {
                cache.forget_unreadable(&event.key, event.revision);
            }
            if let Some(event) = self.event_of(&cache, event) {
                cache.apply(event);
            }
        }
        let revision = cache.revision();
        drop(cache);
        self.revisions.send_replace(revision);
    }

    /// The cache's form of a store event. The state before it is the
    /// cached one when the store sent the same version (so the two share
    /// memory), or none was sent; a DELETED event carries the last state
    /// at the delete's revision.
    fn event_of(&self, cache: &WatchCache, event: StoreEvent) -> Option<Event> {
        let cached = cache.get(&event.key);
        let previous = match (event.previous, cached) {
            (Some(p), Some(c)) if c.revision() == p.mod_revision => Some(c.clone()),
            (Some(p), cached) => match p.read() {
                Ok(read) => Some(self.object(&event.key, read)),
                Err(_) => cached.cloned(),
            },
            (None, cached) => cached.cloned(),
        };
        let (kind, object) = match (event.change, event.object) {
            (Change::Created, Some(stored)) => (EventType::Added, self.object(&event.key, stored)),
            (Change::Updated, Some(stored)) => {
                (EventType::Modified, self.object(&event.key, stored))
            }
            (_, _) => {
                let last = previous.as_ref()?.deleted_at(event.revision, self.fields);
                (EventType::Deleted, Arc::new(last))
            }
        };
        Some(Event {
            kind,
            object,
            previous,
            revision: event.revision,
        })
    }

    fn object(&self, key: &str, stored: Stored) -> Arc<Object> {
        let object = Object::new(key, stored.object, stored.mod_revision, self.fields);
        Arc::new(object)
    }

    /// The store's watch of `prefix` from `from` (inclusive; 0: from the
    /// cache's present), served from the window, then live.
    pub(super) fn raw_watch(&self, prefix: &str, from: i64) -> Result<EventStream, StorageError> {
        let mut cache = self.cache();
        let after = match from {
            0 => cache.revision(),
            from => from - 1,
        };
        let (sender, receiver) = mpsc::channel(cache.buffer_for(Some(after)));
        let owned = prefix.to_string();
        let watcher = Watcher {
            sender,
            filter: Box::new(move |o| o.key().starts_with(&owned)),
            bookmarks: false,
            after,
        };
        cache
            .watch(watcher, Some(after), None)
            .map_err(|err| match err {
                // The window starts after `oldest`: history before that is gone.
                StorageError::Compacted { compacted, .. } => StorageError::Compacted {
                    requested: from,
                    compacted: compacted.map(|oldest| oldest + 1),
                },
                other => other,
            })?;
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            let item = receiver.recv().await?;
            Some((Ok(vec![store_event(item)]), receiver))
        });
        Ok(stream.boxed())
    }
}

/// Lists `prefix` and opens the store watch just after that list.
async fn prime(
    store: &dyn Interface,
    prefix: &str,
    fields: FieldPaths,
) -> Result<(WatchCache, EventStream), StorageError> {
    let request = ListRequest {
        keep_unreadable: true,
        ..Default::default()
    };
    let listing = store.get_list(prefix, request).await?;
    // Indexed again by the fields this cache selects on.
    let objects = listing
        .items
        .into_iter()
        .map(|o| Arc::new(Object::new(o.key(), o.value(), o.revision(), fields)));
    let mut cache = WatchCache::new(objects, listing.revision, WINDOW);
    cache.unreadable = Unreadable::new(listing.unreadable);
    let stream = store.watch(prefix, listing.revision + 1).await?;
    Ok((cache, stream))
}

/// A cache event as the store's (for the Cacher's own `watch`).
fn store_event(item: WatchItem) -> StoreEvent {
    let stored = |o: &Object| Stored {
        object: o.value(),
        mod_revision: o.revision(),
        stale: false,
    };
    let change = match item.kind {
        EventType::Added => Change::Created,
        EventType::Modified => Change::Updated,
        _ => Change::Deleted,
    };
    StoreEvent {
        change,
        key: item.object.key().to_string(),
        object: (change != Change::Deleted).then(|| stored(&item.object)),
        previous: item
            .previous
            .as_deref()
            .map(|p| Earlier::decoded(stored(p))),
        revision: item.object.revision(),
        unreadable: None,
    }
}
