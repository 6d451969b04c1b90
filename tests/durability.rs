//! kill -9 durability: every acknowledged write survives a SIGKILL at any
//! moment, with exactly the revision it was acknowledged with, and the
//! revision counter neither skips nor reuses a value afterwards.
//!
//! `CAPSTAN_CHAOS_ROUNDS` sets the number of kill/restart rounds (default 2).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capstan_tests::client::{assert_grpc_error, connect, current_revision};
use capstan_tests::keyspace::read_keyspace;
use capstan_tests::poll::wait_for_async;
use capstan_tests::store::{StoreProcess, TempStore};
use etcd_client::{Client, GetOptions, LeaseTimeToLiveOptions, PutOptions, Txn, TxnOp};
use tonic::Code;

const WRITERS: usize = 16;

/// A put the store acknowledged, with the revision of its response header.
#[derive(Debug, Clone)]
struct Ack {
    key: String,
    value: String,
    revision: i64,
}

fn chaos_rounds() -> usize {
    std::env::var("CAPSTAN_CHAOS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// A number in 0..n that differs between runs, to vary the kill moment.
fn jitter(n: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos % n
}

/// Puts distinct keys until told to stop or a put fails; records every ack.
async fn write_until_stopped(
    mut client: Client,
    prefix: String,
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
) {
    for seq in 0.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let key = format!("{prefix}/{seq:06}");
        let value = format!("value-{seq}");
        match tokio::time::timeout(
            Duration::from_secs(10),
            client.put(key.clone(), value.clone(), None),
        )
        .await
        {
            Ok(Ok(response)) => {
                let revision = response.header().expect("header").revision();
                acks.lock().unwrap().push(Ack {
                    key,
                    value,
                    revision,
                });
            }
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// Starts the writers, kills the store once enough puts were acknowledged,
/// restarts it, and returns this round's acknowledgements.
async fn kill_during_writes(store: &mut StoreProcess, round: usize) -> Vec<Ack> {
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let client = connect(store).await;
        let prefix = format!("chaos/{round:03}/{writer:02}");
        writers.push(tokio::spawn(write_until_stopped(
            client,
            prefix,
            stop.clone(),
            acks.clone(),
        )));
    }
    let started = Instant::now();
    let target = 150 + jitter(300) as usize;
    wait_for_async(Duration::from_secs(30), "acknowledged puts", || {
        let count = acks.lock().unwrap().len();
        async move { (count >= target).then_some(()) }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    tokio::task::block_in_place(|| store.kill9());
    let killed_after = started.elapsed();
    let acked_at_kill = acks.lock().unwrap().len();
    let restarting = Instant::now();
    tokio::task::block_in_place(|| store.restart());
    let recovery = restarting.elapsed();
    for writer in writers {
        tokio::time::timeout(Duration::from_secs(30), writer)
            .await
            .expect("writer stops")
            .unwrap();
    }
    let acks = acks.lock().unwrap().clone();
    println!(
        "round {round}: {acked_at_kill} puts acknowledged by {WRITERS} writers in {killed_after:?} \
         ({:.0} puts/s) before SIGKILL, {} in total; restart to healthy took {recovery:?}",
        acked_at_kill as f64 / killed_after.as_secs_f64(),
        acks.len(),
    );
    acks
}

/// Every acknowledged put is present with its value and exactly its
/// revision; revisions are unique; the store's revisions have no holes.
async fn check_acks_survived(client: &mut Client, acks: &[Ack], log: impl Fn() -> String) {
    let keyspace = read_keyspace(client).await;
    let stored: BTreeMap<Vec<u8>, _> = keyspace
        .entries
        .iter()
        .map(|e| (e.key.clone(), e))
        .collect();
    let mut lost = Vec::new();
    for ack in acks {
        match stored.get(ack.key.as_bytes()) {
            None => lost.push(ack.clone()),
            Some(entry) => {
                assert_eq!(entry.value, ack.value.as_bytes(), "{ack:?}");
                assert_eq!(
                    entry.mod_revision, ack.revision,
                    "{ack:?} has another revision: {entry:?}"
                );
                assert_eq!(
                    (entry.create_revision, entry.version),
                    (ack.revision, 1),
                    "{entry:?}"
                );
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged puts lost, e.g. {:?}\nlog:\n{}",
        lost.len(),
        &lost[..lost.len().min(5)],
        log()
    );
    let unique: HashSet<i64> = acks.iter().map(|a| a.revision).collect();
    assert_eq!(
        unique.len(),
        acks.len(),
        "two acknowledged puts share a revision"
    );
    let max_acked = acks.iter().map(|a| a.revision).max().unwrap_or(0);
    assert!(
        keyspace.revision >= max_acked,
        "revision {} went behind acknowledged {max_acked}",
        keyspace.revision
    );
    // Every write of this test puts a fresh key, so each revision from 2 to
    // the current one belongs to exactly one key.
    let mut revisions: Vec<i64> = keyspace.entries.iter().map(|e| e.mod_revision).collect();
    revisions.sort_unstable();
    let expected: Vec<i64> = (2..=keyspace.revision).collect();
    assert!(
        revisions == expected,
        "revisions have holes or repeats: {} keys, revision {}",
        revisions.len(),
        keyspace.revision
    );
}

/// A new put right after recovery gets exactly the next revision.
async fn check_next_revision(client: &mut Client, round: usize) {
    let current = current_revision(client).await;
    let key = format!("next/{round:03}");
    let response = client
        .put(key.as_str(), "after restart", None)
        .await
        .expect("put after restart");
    assert_eq!(
        response.header().unwrap().revision(),
        current + 1,
        "no gap and no reuse after restart"
    );
    let got = client.get(key.as_str(), None).await.unwrap();
    assert_eq!(got.kvs()[0].mod_revision(), current + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_puts_survive_kill9_with_their_revisions() {
    let mut store = TempStore::start(&[]);
    let mut all_acks = Vec::new();
    for round in 0..chaos_rounds() {
        all_acks.extend(kill_during_writes(&mut store, round).await);
        let mut client = connect(&store).await;
        let checking = Instant::now();
        check_acks_survived(&mut client, &all_acks, || store.log()).await;
        check_next_revision(&mut client, round).await;
        println!(
            "round {round}: checked {} acknowledged puts in {:?}",
            all_acks.len(),
            checking.elapsed()
        );
    }
}

#[tokio::test]
async fn deletes_txns_and_compaction_survive_kill9() {
    let mut store = TempStore::start(&[]);
    let mut client = connect(&store).await;
    for value in ["1", "2", "3"] {
        client.put("k", value, None).await.unwrap(); // 2..=4
    }
    client.put("gone", "x", None).await.unwrap(); // 5
    client.delete("gone", None).await.unwrap(); // 6
    let txn = Txn::new().and_then([TxnOp::put("t1", "a", None), TxnOp::put("t2", "b", None)]);
    client.txn(txn).await.unwrap(); // 7
    client.compact(4, None).await.unwrap();
    let before = read_keyspace(&mut client).await;
    let hash = client.hash_kv(0).await.unwrap().hash();
    store.kill9();
    store.restart();
    let mut client = connect(&store).await;
    assert_eq!(read_keyspace(&mut client).await, before);
    assert_eq!(client.hash_kv(0).await.unwrap().hash(), hash);
    let old = Some(GetOptions::new().with_revision(3));
    assert_grpc_error(
        client.get("k", old).await,
        Code::OutOfRange,
        "etcdserver: mvcc: required revision has been compacted",
    );
    let at_five = client
        .get("gone", Some(GetOptions::new().with_revision(5)))
        .await
        .unwrap();
    assert_eq!(
        at_five.kvs()[0].value(),
        b"x",
        "history after the compaction point is kept"
    );
    assert_eq!(
        client
            .put("k", "4", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision(),
        8
    );
}

#[tokio::test]
async fn leases_and_their_keys_survive_kill9() {
    let mut store = TempStore::start(&[]);
    let mut client = connect(&store).await;
    let lease = client.lease_grant(600, None).await.unwrap().id();
    client
        .put("leased", "v", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap();
    store.kill9();
    store.restart();
    let mut client = connect(&store).await;
    let ids: Vec<i64> = client
        .leases()
        .await
        .unwrap()
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    assert_eq!(ids, [lease]);
    let info = client
        .lease_time_to_live(lease, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(info.granted_ttl(), 600);
    // A new leader extends every lease by up to an election timeout (1 s).
    assert!(
        info.ttl() > 500 && info.ttl() <= 602,
        "remaining {}",
        info.ttl()
    );
    assert_eq!(info.keys(), [b"leased".to_vec()]);
    assert_eq!(
        client.get("leased", None).await.unwrap().kvs()[0].lease(),
        lease
    );
    client.lease_revoke(lease).await.unwrap();
    assert!(client.get("leased", None).await.unwrap().kvs().is_empty());
}
