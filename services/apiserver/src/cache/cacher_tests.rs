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
