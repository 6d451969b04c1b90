//! The Cacher passes the storage conformance table (`storage/conformance.rs`)
//! in front of the in-memory storage, and of the etcd storage on a real
//! etcd and on a capstan-store process.

use std::sync::Arc;

use super::Cacher;
use crate::storage::conformance::{run_all, Backend};
use crate::storage::conformance_processes::{self as processes, StoreProcess};
use crate::storage::{Interface, MemoryStorage};

/// A Cacher of the conformance table's keys in front of `store`, with its
/// feed running; compacting compacts the store with `compact_store` and
/// the Cacher's window as far.
pub async fn cacher_backend(
    store: Arc<dyn Interface>,
    compact_store: impl Fn(i64) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
) -> Backend {
    let (cacher, feed) = Cacher::start(store, "/registry/conformance/".into(), &[])
        .await
        .expect("the Cacher fills from the store");
    tokio::spawn(feed);
    let window = cacher.clone();
    Backend {
        storage: cacher,
        compact: Box::new(move |revision| {
            let store = compact_store(revision);
            let window = window.clone();
            Box::pin(async move {
                store.await;
                // History before `revision` is gone, as from the store.
                window.forget_through(revision - 1);
            })
        }),
    }
}

#[tokio::test]
async fn the_cacher_on_memory_conforms() {
    let memory = Arc::new(MemoryStorage::new());
    let compacting = memory.clone();
    let backend = cacher_backend(memory, move |revision| {
        compacting.compact(revision);
        Box::pin(async {})
    })
    .await;
    run_all(&backend, "/registry/conformance").await;
}

/// The Cacher in front of the etcd storage on `process`.
async fn on_process(process: &StoreProcess) -> Backend {
    let store = process.backend();
    let connection = process.connection.clone();
    cacher_backend(store.storage, move |revision| {
        let connection = connection.clone();
        Box::pin(async move { processes::compact(&connection, revision).await })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cacher_on_etcd_conforms() {
    let etcd = processes::etcd().await.expect(processes::NO_ETCD);
    run_all(&on_process(&etcd).await, "/registry/conformance").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cacher_on_capstan_store_conforms() {
    let store = processes::capstan_store().await;
    run_all(&on_process(&store).await, "/registry/conformance").await;
}

/// A Cacher over memory whose cache holds `key` as first written and is
/// not fed afterwards (its feed is never run): a copy that trails the
/// store for as long as the test likes.
async fn trailing_cacher(key: &str) -> (Arc<MemoryStorage>, Arc<Cacher>, i64) {
    let memory = Arc::new(MemoryStorage::new());
    let first = serde_json::json!({"metadata": {"name": "a"}, "data": {"v": "0"}});
    let created = memory.create(key, &first, None).await.unwrap();
    let (cacher, _feed) = Cacher::start(memory.clone(), "/registry/t/".into(), &[])
        .await
        .unwrap();
    (memory, cacher, created)
}

#[tokio::test]
async fn an_update_starts_from_the_cached_copy_and_retries_on_the_store_when_it_trails() {
    use crate::storage::{GuaranteedUpdate, Preconditions, StorageError};
    let key = "/registry/t/a";
    let (memory, cacher, created) = trailing_cacher(key).await;
    assert_eq!(cacher.suggestion(key).unwrap().mod_revision, created);
    // The store moves on; the cache does not hear of it.
    let mut rival = memory.get(key).await.unwrap().unwrap().object;
    rival["data"]["rival"] = "yes".into();
    let newer = memory.update(key, &rival, created).await.unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    let written = cacher
        .guaranteed_update::<StorageError, _, _, serde_json::Value>(
            key,
            &Preconditions::default(),
            |current| {
                seen.lock().unwrap().push(current.mod_revision);
                let mut mine = current.object;
                mine["data"]["v"] = "1".into();
                async move { Ok(mine) }
            },
        )
        .await
        .unwrap();
    // First the cached copy (its write conflicts), then the store's.
    assert_eq!(*seen.lock().unwrap(), vec![created, newer]);
    let stored = memory.get(key).await.unwrap().unwrap();
    assert_eq!(
        stored.object["data"],
        serde_json::json!({"v": "1", "rival": "yes"})
    );
    assert_eq!(stored.mod_revision, written.mod_revision);
}

#[tokio::test]
async fn a_refusal_or_a_no_op_on_a_trailing_copy_is_decided_again_on_the_stores() {
    use crate::storage::{GuaranteedUpdate, Preconditions, StorageError};
    let key = "/registry/t/a";
    let (memory, cacher, created) = trailing_cacher(key).await;
    let mut newer_object = memory.get(key).await.unwrap().unwrap().object;
    newer_object["data"]["v"] = "2".into();
    let newer = memory.update(key, &newer_object, created).await.unwrap();
    // A writer pinned to the revision it read (the store's, newer than the
    // cache's): refused on the cached copy, written on the store's.
    let pinned = |current: crate::storage::Stored| async move {
        if current.mod_revision != newer {
            return Err(StorageError::Conflict);
        }
        let mut next = current.object;
        next["data"]["v"] = "3".into();
        Ok(next)
    };
    let none = Preconditions::default();
    let written = cacher.guaranteed_update(key, &none, pinned).await.unwrap();
    assert!(written.mod_revision > newer);
    // A change that leaves the cached copy as it is still writes when the
    // store's copy differs: a no-op is only a no-op on the current state.
    let (memory, cacher, created) = trailing_cacher(key).await;
    let mut moved = memory.get(key).await.unwrap().unwrap().object;
    moved["data"]["v"] = "9".into();
    memory.update(key, &moved, created).await.unwrap();
    let back_to_first = |current: crate::storage::Stored| async move {
        let mut next = current.object;
        next["data"]["v"] = "0".into();
        Ok::<_, StorageError>(next)
    };
    cacher
        .guaranteed_update(key, &none, back_to_first)
        .await
        .unwrap();
    let stored = memory.get(key).await.unwrap().unwrap();
    assert_eq!(stored.object["data"]["v"], "0");
}
