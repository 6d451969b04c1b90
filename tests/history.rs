//! Bounding history and the raft log on a single member: automatic
//! compaction, and a raft log truncated behind the applied index that still
//! restarts correctly after kill -9.

use std::time::Duration;

use capstan_tests::client::connect;
use capstan_tests::poll::wait_for_async;
use capstan_tests::store::{metric_value, on_reference_etcd, TempStore};
use etcd_client::{Error, GetOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_auto_compaction_discards_history_older_than_the_retention() {
    let store = TempStore::start(&["--auto-compaction-retention", "2s"]);
    let mut client = connect(&store).await;
    let first = client
        .put("k", "1", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    client.put("k", "2", None).await.unwrap();
    wait_for_async(
        Duration::from_secs(15),
        "auto-compaction past the first put",
        || {
            let mut client = client.clone();
            async move {
                client.put("tick", "", None).await.ok()?;
                match client
                    .get("k", Some(GetOptions::new().with_revision(first)))
                    .await
                {
                    Err(Error::GRpcStatus(status)) if status.message().contains("compacted") => {
                        Some(())
                    }
                    _ => None,
                }
            }
        },
    )
    .await;
    // The newest value survives compaction.
    let resp = client.get("k", None).await.unwrap();
    assert_eq!(resp.kvs()[0].value(), b"2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_raft_log_restarts_with_every_write() {
    let mut store = TempStore::start(&["--snapshot-count", "20"]);
    let mut client = connect(&store).await;
    for i in 0..300 {
        client
            .put(format!("t{i:03}"), format!("{i}"), None)
            .await
            .unwrap();
    }
    // 300 writes at --snapshot-count 20 take many snapshots, each letting
    // the member drop the log before it; the metrics show it happened.
    assert_log_truncated(&store.metrics());
    store.kill9();
    store.restart();
    let mut client = connect(&store).await;
    let resp = client
        .get("t", Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert_eq!(resp.kvs().len(), 300);
    assert!(resp
        .kvs()
        .iter()
        .enumerate()
        .all(|(i, kv)| kv.value() == i.to_string().as_bytes()));
    let next = client
        .put("after", "", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    assert_eq!(
        next, 302,
        "revisions continue without a gap after the restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_large_values_is_truncated_by_its_bytes_and_restarts_whole() {
    let mut store = TempStore::start(&[]);
    let mut client = connect(&store).await;
    // 96 values of 512 KiB: 48 MiB of log, far fewer entries than the
    // default --snapshot-count, more bytes than the member keeps in memory.
    let value = |i: usize| vec![b'a' + (i % 26) as u8; 512 << 10];
    for i in 0..96 {
        client
            .put(format!("big{i:02}"), value(i), None)
            .await
            .unwrap();
    }
    if !on_reference_etcd() {
        let scrape = wait_for_async(Duration::from_secs(30), "the log cut by bytes", || {
            let scrape = store.metrics();
            let bytes = metric_value(&scrape, "capstan_store_raft_log_entry_bytes");
            async move {
                bytes
                    .is_some_and(|b| b > 0.0 && b <= (32 << 20) as f64)
                    .then_some(scrape)
            }
        })
        .await;
        assert_log_truncated(&scrape);
    }
    store.kill9();
    store.restart();
    let mut client = connect(&store).await;
    for i in 0..96 {
        let resp = client.get(format!("big{i:02}"), None).await.unwrap();
        assert!(
            resp.kvs()[0].value() == value(i).as_slice(),
            "big{i:02} changed"
        );
    }
}

/// capstan-store shows where its raft log starts; etcd has no such metric,
/// but counts the snapshots it saves, each of which lets it compact the log.
fn assert_log_truncated(scrape: &str) {
    let (name, floor) = if on_reference_etcd() {
        ("etcd_debugging_snap_save_total_duration_seconds_count", 0.0)
    } else {
        ("capstan_store_raft_log_first_index", 1.0)
    };
    let value = metric_value(scrape, name);
    assert!(
        value.is_some_and(|v| v > floor),
        "{name} should be above {floor} after the log was truncated, is {value:?}"
    );
    if !on_reference_etcd() {
        // The log is cut only behind a durable state machine.
        let name = "capstan_store_state_flush_duration_seconds_count";
        let flushes = metric_value(scrape, name);
        assert!(
            flushes.is_some_and(|v| v >= 1.0),
            "{name} should count the flushes before each cut, is {flushes:?}"
        );
    }
}
