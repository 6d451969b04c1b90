//! The Cacher: a [`WatchCache`] in front of another [`Interface`] (the
//! etcd one), itself an [`Interface`] (Kubernetes' `cacher.Cacher`).
//! Reads that may be answered from memory are: a get or a list at any
//! state, at a state not older than a revision, or at the current state
//! (a consistent read: one linearizable read of the store tells what the
//! cache must have caught up with, `fresh.rs`); watches are served from
//! the cache's window and then live. Reads of the past (`Exact`, continue
//! tokens) and everything that writes go through to the store. The cache
//! is fed by one store watch on its prefix (`feed.rs`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::watch_cache::{Filter, WatchCache, WatchItem, Watcher};
use crate::storage::{
    EventStream, FieldPaths, Freshness, Interface, ListRequest, Listing, Object, ReadAt,
    StorageError, StorageFuture, Stored,
};

/// Events kept for watches that resume from a past revision.
pub const WINDOW: usize = 4096;

pub struct Cacher {
    pub(super) store: Arc<dyn Interface>,
    /// The keys cached: one resource type's.
    pub(super) prefix: String,
    /// The selectable fields each object is indexed by.
    pub(super) fields: FieldPaths,
    pub(super) cache: Mutex<WatchCache>,
    /// The cache's revision, for reads waiting for it to catch up.
    pub(super) revisions: watch::Sender<i64>,
}

/// What a watch of the cache asks for.
pub struct WatchRequest {
    /// Unset: the current state first (as ADDED); else the changes after
    /// this revision (with `initial`, the state at it first).
    pub at: ReadAt,
    pub initial: bool,
    pub filter: Filter,
    pub bookmarks: bool,
    /// The BOOKMARK that ends the initial events, made at the revision
    /// they reflect (`sendInitialEvents`).
    pub end_bookmark: Option<Box<dyn FnOnce(i64) -> Object + Send>>,
}

impl Cacher {
    pub(super) fn cache(&self) -> MutexGuard<'_, WatchCache> {
        // A panic while holding the lock leaves a cache that is still whole
        // (every change is applied in one step).
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn revision(&self) -> i64 {
        self.cache().revision()
    }

    /// Sends a BOOKMARK to the watchers that asked for them, and drops
    /// watchers whose clients went away.
    pub fn bookmark(&self, make: impl Fn(i64) -> Object) {
        let mut cache = self.cache();
        cache.prune();
        cache.bookmark(make);
    }

    /// Forgets the window's events at or before `revision`, as a store's
    /// compaction forgets history (for tests of the too-old answers).
    pub fn forget_through(&self, revision: i64) {
        self.cache().forget_through(revision);
    }

    /// A watch of the cache, filtered, with kube's resourceVersion rules:
    /// from a revision the cache has reached, or `Any`, at once; from one
    /// it has not (or the current state), once it has (see `fresh.rs`).
    /// Too old for the window is `Compacted` with the oldest it serves.
    pub async fn watch_objects(
        &self,
        request: WatchRequest,
    ) -> Result<mpsc::Receiver<WatchItem>, StorageError> {
        let from = request.at.minimum();
        let initial = request.initial || from.is_none();
        let reached = !initial && from.is_some_and(|rv| rv <= self.revision());
        let revision = match reached || request.at == ReadAt::Any {
            true => self.revision(),
            false => self.fresh(&self.prefix, true, request.at).await?,
        };
        let mut cache = self.cache();
        let from_window = from.filter(|_| !initial);
        let (sender, receiver) = mpsc::channel(cache.buffer_for(from_window));
        let watcher = Watcher {
            sender,
            filter: request.filter,
            bookmarks: request.bookmarks,
            // The initial state is the cache's; later events follow it.
            after: match initial {
                true => cache.revision(),
                false => from.unwrap_or(0),
            },
        };
        let end = request.end_bookmark.map(|make| Arc::new(make(revision)));
        cache.watch(watcher, from_window, end)?;
        Ok(receiver)
    }

    /// A page of the cached objects under `prefix` that pass `filter`, at
    /// most `limit` (0: all); `next_key` follows the last one examined.
    fn page(&self, prefix: &str, request: &ListRequest<'_>, revision: i64) -> Listing {
        let cache = self.cache();
        let mut items = Vec::new();
        let mut last = None;
        for object in cache.under(prefix, request.start) {
            if request.filter.is_some_and(|f| !f.matches(object)) {
                continue;
            }
            items.push(object.clone());
            if request.limit > 0 && items.len() as i64 >= request.limit {
                last = Some(format!("{}\0", object.key()));
                break;
            }
        }
        let remaining = match &last {
            Some(start) => cache.under(prefix, Some(start)).count() as i64,
            None => 0,
        };
        Listing {
            items,
            revision,
            next_key: last.filter(|_| remaining > 0),
            remaining,
            unreadable: Vec::new(),
        }
    }
}

impl Interface for Cacher {
    /// A write's read: straight from the store, as kube's Cacher does
    /// for GuaranteedUpdate (the cache may trail a write just made).
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Stored>> {
        self.store.get(key)
    }

    /// The cached copy, as kube's Cacher hands its copy to the store's
    /// GuaranteedUpdate: an update that finds it current writes with one
    /// round trip to the store instead of two.
    fn suggestion(&self, key: &str) -> Option<Stored> {
        let cache = self.cache();
        if cache.unreadable.get(key).is_some() {
            return None;
        }
        cache.get(key).map(|o| stored(o))
    }

    fn get_at<'a>(&'a self, key: &'a str, at: ReadAt) -> StorageFuture<'a, Option<Stored>> {
        Box::pin(async move {
            let at = match at {
                ReadAt::Exact(rv) => ReadAt::NotOlderThan(rv),
                other => other,
            };
            self.fresh(key, false, at).await?;
            let cache = self.cache();
            if let Some(err) = cache.unreadable.get(key) {
                return Err(err.clone());
            }
            Ok(cache.get(key).map(|o| stored(o)))
        })
    }

    /// From the cache, but a read of the past (a continue token's start, an
    /// exact revision) goes to the store: the cache holds only the present.
    fn get_list<'a>(
        &'a self,
        prefix: &'a str,
        request: ListRequest<'a>,
    ) -> StorageFuture<'a, Listing> {
        Box::pin(async move {
            if request.start.is_some() || matches!(request.at, ReadAt::Exact(_)) {
                return self.store.get_list(prefix, request).await;
            }
            let revision = self.fresh(prefix, true, request.at).await?;
            if let Some(err) = self.cache().unreadable.under(prefix) {
                return Err(err);
            }
            Ok(self.page(prefix, &request, revision))
        })
    }

    fn count<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, i64> {
        self.store.count(prefix)
    }

    fn freshness<'a>(&'a self, key: &'a str, prefix: bool) -> StorageFuture<'a, Freshness> {
        self.store.freshness(key, prefix)
    }

    /// The store's events from the cache's window, then live ones.
    fn watch<'a>(&'a self, prefix: &'a str, from: i64) -> StorageFuture<'a, EventStream> {
        Box::pin(async move { self.raw_watch(prefix, from) })
    }

    fn create_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        claims: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        self.store.create_claiming(key, object, claims, ttl)
    }

    fn update_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        mod_revision: i64,
        claims: &'a [String],
        releases: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        self.store
            .update_claiming(key, object, mod_revision, claims, releases, ttl)
    }

    fn delete_releasing<'a>(
        &'a self,
        key: &'a str,
        mod_revision: i64,
        releases: &'a [String],
    ) -> StorageFuture<'a, i64> {
        self.store.delete_releasing(key, mod_revision, releases)
    }
}

/// A cached object as a read's answer.
fn stored(object: &Object) -> Stored {
    Stored {
        object: object.value(),
        mod_revision: object.revision(),
        stale: false,
    }
}
