//! The conformance table (`conformance.rs`) against the etcd storage on a
//! store in this process, reached as `capstan` reaches its own: reads and
//! writes call the store's KV service directly, watches and compaction go
//! through the in-process channel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_store::config::{Flags, StoreConfig};
use capstan_store::server::in_process;

use super::conformance::{run_all, Backend};
use super::conformance_processes::compact;
use super::{Connection, InProcessStore, Store, StoreChannel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_storage_on_a_store_in_this_process_conforms() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let flags = Flags {
        data_dir: Some(dir.path().join("member")),
        ..Default::default()
    };
    let member = capstan_store::open(&StoreConfig::load(&flags).unwrap()).unwrap();
    let store = InProcessStore {
        channel: StoreChannel::Custom(in_process::channel(&member, Vec::new())),
        kv: in_process::kv(&member, Vec::new()),
    };
    let connection = Connection::in_process("the store in this test", store)
        .await
        .unwrap();
    // The lone member elects itself within an election timeout.
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(err) = Store::new(&connection).current_revision().await {
        assert!(Instant::now() < deadline, "no leader within 30s: {err}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let compacting = connection.clone();
    let backend = Backend {
        storage: Arc::new(Store::new(&connection)),
        compact: Box::new(move |revision| {
            let connection = compacting.clone();
            Box::pin(async move { compact(&connection, revision).await })
        }),
    };
    run_all(&backend, "/registry/conformance").await;
}
