//! A member that was down while many keys were written catches up by a
//! raft snapshot: the leader cuts it to a file and streams it in chunks,
//! the member writes the chunks to a file and installs from it. Both
//! files go once used.

use std::path::Path;
use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::poll::{wait_for, wait_for_async};
use capstan_tests::writers::connect;
use etcd_client::{GetOptions, Txn, TxnOp};

const KEYS: usize = 3000;
/// Keys per transaction: many raft entries, so the log is truncated past
/// what the stopped member has.
const PER_TXN: usize = 30;

fn value(i: usize) -> String {
    format!("{i:05}-{}", "v".repeat(2000))
}

/// Snapshot files left in a member's data directory.
fn snapshot_files(data_dir: &Path) -> Vec<String> {
    std::fs::read_dir(data_dir.join("snap"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".snap"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_down_while_keys_were_written_catches_up_by_a_streamed_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &["--snapshot-count", "20"]);
    let leader = cluster.wait_for_leader(Duration::from_secs(10));
    let down = (leader + 1) % 3;
    cluster.members[down].kill9();
    let mut client = connect(&cluster.running_urls()).await;
    // About 6 MiB: several chunks of the transport's 1 MiB.
    for batch in 0..KEYS / PER_TXN {
        let puts: Vec<TxnOp> = (batch * PER_TXN..(batch + 1) * PER_TXN)
            .map(|i| TxnOp::put(format!("bulk{i:05}"), value(i), None))
            .collect();
        client.txn(Txn::new().and_then(puts)).await.unwrap();
    }
    let written = client.get("bulk", None).await.unwrap();
    let revision = written.header().unwrap().revision();

    cluster.members[down].start();
    let member = &cluster.members[down];
    wait_for(Duration::from_secs(30), "a snapshot installed", || {
        member
            .gauge("raft_snapshots_applied_total")
            .filter(|n| *n >= 1)
    });
    let local = connect(&[member.url()]).await;
    let count = wait_for_async(Duration::from_secs(30), "the member caught up", || {
        let mut local = local.clone();
        async move {
            let options = GetOptions::new()
                .with_prefix()
                .with_count_only()
                .with_serializable();
            let resp = local.get("bulk", Some(options)).await.ok()?;
            let caught_up = resp.header()?.revision() >= revision;
            caught_up.then(|| resp.count())
        }
    })
    .await;
    assert_eq!(count as usize, KEYS);
    // Read in pages: the whole range is more than a client takes at once.
    let mut local = local;
    for page in (0..KEYS).step_by(PER_TXN) {
        let end = format!("bulk{:05}", page + PER_TXN);
        let options = GetOptions::new().with_range(end).with_serializable();
        let start = format!("bulk{page:05}");
        let resp = local.get(start, Some(options)).await.unwrap();
        assert_eq!(resp.kvs().len(), PER_TXN);
        for (i, kv) in (page..).zip(resp.kvs()) {
            assert_eq!(kv.key_str().unwrap(), format!("bulk{i:05}"));
            assert_eq!(kv.value_str().unwrap(), value(i));
        }
    }
    let received = member.gauge("network_snapshot_receive_success_total");
    assert!(received >= Some(1), "received in full: {received:?}");
    for m in &cluster.members {
        wait_for(Duration::from_secs(10), "snapshot files removed", || {
            snapshot_files(&m.data_dir).is_empty().then_some(())
        });
    }
}
