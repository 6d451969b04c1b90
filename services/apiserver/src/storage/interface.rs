//! The storage interface, shaped like Kubernetes' `storage.Interface`:
//! what the registry needs from a store of JSON objects under string keys
//! with one global revision. [`super::Store`] implements it on any etcd v3
//! store, [`super::MemoryStorage`] in memory for unit tests, and
//! `cache::Cacher` in front of either, answering reads and watches from
//! memory; the same conformance table (`conformance.rs`) runs against all.
//!
//! Revisions are etcd's: every write makes a new one, an object's
//! `resourceVersion` is the revision of its last write, and reads and
//! watches can ask for a past revision until compaction removes it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;

use super::{Object, StorageError};
use crate::object::meta;

/// One object read from the store with the revision of its last write
/// (already set as its `metadata.resourceVersion`).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub object: Value,
    pub mod_revision: i64,
    /// Read through a provider or key other than the one that writes now
    /// (encryption at rest): writing the same object again is not a
    /// no-op, it rewrites the value under the current key (kube's stale
    /// values, how rotation rewrites Secrets).
    pub stale: bool,
}

/// What a linearizable read says about a key or a key prefix: the
/// store's revision, the newest mod_revision among the live keys there
/// (0 when there are none), and how many live keys there are. A cache
/// that has applied every event up to `newest` and holds `count` keys
/// there holds exactly the store's state at `revision`: every live key's
/// last write is at or before `newest`, so the cache has it, and a key
/// deleted after `newest` would show as one key too many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Freshness {
    pub revision: i64,
    pub newest: i64,
    pub count: i64,
}

/// Which state of the store a read may answer from: Kubernetes'
/// `resourceVersion` with `resourceVersionMatch`. A store without a cache
/// answers all but `Exact` with its current state; the Cacher answers all
/// but `Exact` from memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum ReadAt {
    /// The current state (no resourceVersion): a consistent read.
    #[default]
    Latest,
    /// Any state, however stale (`resourceVersion=0`).
    Any,
    /// A state at this revision or later.
    NotOlderThan(i64),
    /// The state at exactly this revision (a continue token's, or
    /// `resourceVersionMatch=Exact`); compacted history is `Compacted`.
    Exact(i64),
}

impl ReadAt {
    /// The revision to read at: the exact one, or 0 (now).
    pub fn exact(self) -> i64 {
        match self {
            ReadAt::Exact(revision) => revision,
            _ => 0,
        }
    }

    /// The oldest revision the answer may reflect, when one is set.
    pub fn minimum(self) -> Option<i64> {
        match self {
            ReadAt::NotOlderThan(revision) | ReadAt::Exact(revision) => Some(revision),
            _ => None,
        }
    }

    /// A state read at the store's `current` revision is too old for this.
    pub fn check(self, current: i64) -> Result<(), StorageError> {
        match self.minimum() {
            Some(requested) if requested > current => {
                Err(StorageError::FutureRevision { requested, current })
            }
            _ => Ok(()),
        }
    }
}

/// Which objects a list wants (label and field selectors, namespace).
#[derive(Clone, Copy)]
pub struct Predicate<'a>(pub &'a (dyn Fn(&Object) -> bool + Send + Sync));

impl Predicate<'_> {
    pub fn matches(&self, object: &Object) -> bool {
        (self.0)(object)
    }
}

impl std::fmt::Debug for Predicate<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Predicate")
    }
}

/// Which part of a prefix a list reads, and when.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListRequest<'a> {
    /// The first key to read (inclusive); the prefix itself when unset.
    pub start: Option<&'a str>,
    pub at: ReadAt,
    /// At most this many objects; 0 is all of them. With a `filter`, a
    /// page may hold fewer (the store filters the keys it read); the
    /// caller reads on from `next_key`.
    pub limit: i64,
    /// Only the objects that pass; all when unset.
    pub filter: Option<Predicate<'a>>,
    /// Values that cannot be read (not decrypted, not decoded) are put in
    /// `Listing::unreadable` instead of failing the list: for the watch
    /// cache's fill, which then answers for each of them.
    pub keep_unreadable: bool,
}

/// A page of a list, read at one revision.
#[derive(Debug)]
pub struct Listing {
    /// Shared with the cache when it answered (see [`Object`]).
    pub items: Vec<Arc<Object>>,
    /// The store's current revision when the page was read (a read at a
    /// past revision reports the present one, as etcd's header does; the
    /// Cacher reports the revision its state is at).
    pub revision: i64,
    /// The key after the last one read, when more remain.
    pub next_key: Option<String>,
    /// Keys after `next_key` (whether or not they pass the filter).
    pub remaining: i64,
    /// With `keep_unreadable`: the keys whose values cannot be read.
    pub unreadable: Vec<(String, StorageError)>,
}

/// Conditions a delete or an update checks against the current object
/// (Kubernetes' `storage.Preconditions`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Preconditions {
    pub fn check(&self, current: &Stored) -> Result<(), StorageError> {
        if let Some(uid) = &self.uid {
            let have = meta::uid(&current.object);
            if uid != have {
                return Err(StorageError::Precondition {
                    what: "UID",
                    want: uid.clone(),
                    have: have.to_string(),
                });
            }
        }
        if let Some(rv) = &self.resource_version {
            if *rv != current.mod_revision.to_string() {
                return Err(StorageError::Precondition {
                    what: "ResourceVersion",
                    want: rv.clone(),
                    have: current.mod_revision.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// What a store event did to its key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    Created,
    Updated,
    Deleted,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreEvent {
    pub change: Change,
    pub key: String,
    /// The state after the change; none for a delete.
    pub object: Option<Stored>,
    /// The state before the change, when the store sent it.
    pub previous: Option<Earlier>,
    pub revision: i64,
    /// A put whose value cannot be read (not decrypted, not decoded):
    /// why; `object` is then none.
    pub unreadable: Option<StorageError>,
}

/// The state before a change, as the store sent it, decoded only when
/// read: a watch cache holds that revision already nearly always, and
/// decoding every changed pod's JSON a second time was a visible share
/// of a write's cost.
#[derive(Clone)]
pub struct Earlier {
    pub mod_revision: i64,
    read: Arc<dyn Fn() -> Result<Stored, StorageError> + Send + Sync>,
}

impl Earlier {
    /// A state already decoded.
    pub fn decoded(stored: Stored) -> Earlier {
        Earlier {
            mod_revision: stored.mod_revision,
            read: Arc::new(move || Ok(stored.clone())),
        }
    }

    /// A state `read` decodes when asked.
    pub fn encoded(
        mod_revision: i64,
        read: impl Fn() -> Result<Stored, StorageError> + Send + Sync + 'static,
    ) -> Earlier {
        Earlier {
            mod_revision,
            read: Arc::new(read),
        }
    }

    pub fn read(&self) -> Result<Stored, StorageError> {
        (self.read)()
    }
}

impl std::fmt::Debug for Earlier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Earlier")
            .field("mod_revision", &self.mod_revision)
            .finish_non_exhaustive()
    }
}

/// Two states before are the same when they are of the same write.
impl PartialEq for Earlier {
    fn eq(&self, other: &Earlier) -> bool {
        self.mod_revision == other.mod_revision
    }
}

/// A watch: the events of each revision come together, in revision order.
/// It ends, or yields an error and ends, when the store stops serving it;
/// `Compacted` says the history it needed is gone.
pub type EventStream = BoxStream<'static, Result<Vec<StoreEvent>, StorageError>>;

pub type StorageFuture<'a, T> = BoxFuture<'a, Result<T, StorageError>>;

pub trait Interface: Send + Sync {
    /// The object at `key`, by a linearizable read (what a write's
    /// read-modify-write starts from).
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Stored>>;

    /// The object at `key` as `at` allows (Kubernetes' get with a
    /// resourceVersion): here a linearizable read, refused as
    /// `FutureRevision` when the store has not reached the revision asked.
    fn get_at<'a>(&'a self, key: &'a str, at: ReadAt) -> StorageFuture<'a, Option<Stored>> {
        Box::pin(async move {
            if at.minimum().is_some() {
                at.check(self.current_revision().await?)?;
            }
            self.get(key).await
        })
    }

    /// Writes `object` only if `key` does not exist (else `Exists`); with
    /// a `ttl`, the object goes when it runs out. The new revision.
    fn create<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64> {
        self.create_claiming(key, object, &[], ttl)
    }

    /// Writes `object` only if `key` was last written at `mod_revision`
    /// (else `Conflict`): the compare-and-swap under guaranteed update.
    fn update<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        mod_revision: i64,
    ) -> StorageFuture<'a, i64> {
        self.update_claiming(key, object, mod_revision, &[], &[], None)
    }

    /// Deletes `key` only if it was last written at `mod_revision`.
    fn delete_at<'a>(&'a self, key: &'a str, mod_revision: i64) -> StorageFuture<'a, i64> {
        self.delete_releasing(key, mod_revision, &[])
    }

    /// Objects under `prefix`, in key order, as [`ListRequest`] asks.
    fn get_list<'a>(
        &'a self,
        prefix: &'a str,
        request: ListRequest<'a>,
    ) -> StorageFuture<'a, Listing>;

    /// How many objects there are under `prefix` now.
    fn count<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, i64>;

    /// A linearizable read of `key` alone, or of every key under it when
    /// `prefix` (see [`Freshness`]).
    fn freshness<'a>(&'a self, key: &'a str, prefix: bool) -> StorageFuture<'a, Freshness>;

    /// Every change under `prefix` from revision `from` on (inclusive);
    /// `Compacted` when that history is gone, from here or (etcd checks
    /// after confirming the watch) as the stream's first item.
    fn watch<'a>(&'a self, prefix: &'a str, from: i64) -> StorageFuture<'a, EventStream>;

    /// [`Interface::create`] that also takes the claim keys `claims` (see
    /// `claims.rs`) in the same transaction: `Taken` when another object
    /// holds some of them. Every write is one of these three (the plain
    /// ones take and release nothing), so a store, or a wrapper around
    /// one, implements each write once.
    fn create_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        claims: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64>;

    /// [`Interface::update`] that also takes `claims` and drops `releases`.
    fn update_claiming<'a>(
        &'a self,
        key: &'a str,
        object: &'a Value,
        mod_revision: i64,
        claims: &'a [String],
        releases: &'a [String],
        ttl: Option<Duration>,
    ) -> StorageFuture<'a, i64>;

    /// [`Interface::delete_at`] that also drops the claims in `releases`.
    fn delete_releasing<'a>(
        &'a self,
        key: &'a str,
        mod_revision: i64,
        releases: &'a [String],
    ) -> StorageFuture<'a, i64>;

    /// Deletes `key` if `preconditions` hold for it as it is now, retrying
    /// when it changes in between; the object as it was deleted.
    fn delete<'a>(
        &'a self,
        key: &'a str,
        preconditions: &'a Preconditions,
    ) -> StorageFuture<'a, Stored> {
        Box::pin(async move {
            loop {
                let current = self.get(key).await?;
                let current = current.ok_or_else(|| StorageError::NotFound(key.to_string()))?;
                preconditions.check(&current)?;
                match self.delete_at(key, current.mod_revision).await {
                    Ok(_) => return Ok(current),
                    Err(StorageError::Conflict) => continue,
                    Err(e) => return Err(e),
                }
            }
        })
    }

    /// A copy of `key` a write may start from instead of reading the
    /// store (kube's cached existing object), or none. It may trail the
    /// store: a guaranteed update that fails on it reads the store and
    /// starts over.
    fn suggestion(&self, _key: &str) -> Option<Stored> {
        None
    }

    /// The store's current revision.
    fn current_revision(&self) -> StorageFuture<'_, i64> {
        Box::pin(async move { Ok(self.freshness("\0", false).await?.revision) })
    }
}

/// What a guaranteed update's change wants written: the new object, the
/// claim keys it takes and gives up with it (see `claims.rs`), and how
/// long it lives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Proposed {
    pub object: Value,
    pub take: Vec<String>,
    pub release: Vec<String>,
    pub ttl: Option<Duration>,
}

impl From<Value> for Proposed {
    fn from(object: Value) -> Proposed {
        Proposed {
            object,
            ..Proposed::default()
        }
    }
}

/// Guaranteed update for every [`Interface`], `dyn` ones included (it is
/// generic over the caller's change and error, so it lives outside the
/// object-safe trait).
pub trait GuaranteedUpdate: Interface {
    /// Kubernetes' GuaranteedUpdate: reads `key` (or starts from its
    /// [`Interface::suggestion`]), checks `preconditions`,
    /// lets `change` build the new object from the current one, and writes
    /// it with a compare on the revision read, starting over when someone
    /// wrote in between. `change` returning the current object unchanged
    /// writes nothing; `change` failing writes nothing and ends the update
    /// with its error. The object as written.
    fn guaranteed_update<'a, E, F, Fut, P>(
        &'a self,
        key: &'a str,
        preconditions: &'a Preconditions,
        mut change: F,
    ) -> BoxFuture<'a, Result<Stored, E>>
    where
        E: From<StorageError> + Send + 'a,
        F: FnMut(Stored) -> Fut + Send + 'a,
        Fut: Future<Output = Result<P, E>> + Send + 'a,
        P: Into<Proposed>,
    {
        Box::pin(async move {
            let mut suggested = self.suggestion(key);
            loop {
                // Only what the store said now is final: a refusal, or a
                // no-op, on a suggested copy is tried again on the store's.
                let read = suggested.is_none();
                let current = match suggested.take() {
                    Some(copy) => copy,
                    None => self
                        .get(key)
                        .await?
                        .ok_or_else(|| StorageError::NotFound(key.to_string()))?,
                };
                if let Err(e) = preconditions.check(&current) {
                    match read {
                        true => return Err(e.into()),
                        false => continue,
                    }
                }
                let revision = current.mod_revision;
                let unchanged = current.object.clone();
                let stale = current.stale;
                let proposed: Proposed = match change(current).await {
                    Ok(proposed) => proposed.into(),
                    Err(e) if read => return Err(e),
                    Err(_) => continue,
                };
                let Proposed {
                    mut object,
                    take,
                    release,
                    ttl,
                } = proposed;
                if object == unchanged && !stale {
                    if !read {
                        continue;
                    }
                    return Ok(Stored {
                        object,
                        mod_revision: revision,
                        stale,
                    });
                }
                let written = self.update_claiming(key, &object, revision, &take, &release, ttl);
                match written.await {
                    Ok(written) => {
                        meta::set_resource_version(&mut object, written);
                        return Ok(Stored {
                            object,
                            mod_revision: written,
                            stale: false,
                        });
                    }
                    Err(StorageError::Conflict) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        })
    }
}

impl<T: Interface + ?Sized> GuaranteedUpdate for T {}
