//! Replicated clusters of real `capstan-store` processes, tested by
//! killing and pausing members under writes and watches (members wiped,
//! added, promoted, moved and removed: `cluster_membership`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::poll::wait_for;
use capstan_tests::writers::{
    connect, put_until_ok, spawn_writers, wait_acked, wait_converged, wait_failed, wait_resumed,
    History,
};
use etcd_client::{Client, ConnectOptions, GetOptions, WatchOptions};
use tokio::sync::Mutex;

/// Generous deadlines for writes to flow, or to resume after a fault, on
/// a loaded 2-core machine: waits for conditions, not timings.
const WRITES: Duration = Duration::from_secs(60);

/// Every key under `prefix` with its mod revision, read linearizably.
async fn stored(urls: &[String], prefix: &str) -> HashMap<String, i64> {
    let mut client = connect(urls).await;
    let resp = client
        .get(prefix, Some(GetOptions::new().with_prefix()))
        .await
        .expect("read back");
    resp.kvs()
        .iter()
        .map(|kv| (kv.key_str().unwrap().to_string(), kv.mod_revision()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_on_any_member_are_read_linearizably_on_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    for (i, member) in cluster.members.iter().enumerate() {
        let mut client = connect(&[member.url()]).await;
        client
            .put(format!("k{i}"), "v", None)
            .await
            .expect("put on a member");
        for reader in &cluster.members {
            let mut client = connect(&[reader.url()]).await;
            let resp = client.get(format!("k{i}"), None).await.expect("get");
            assert_eq!(
                resp.kvs().len(),
                1,
                "write on member {i} not visible on {}",
                reader.name
            );
        }
    }
    let revision = wait_converged(&cluster.urls(), Duration::from_secs(10)).await;
    assert_eq!(revision, 4);
    // Raft's messages went over the direct links: every member wrote and
    // read some (a leader sends appends, followers answer them).
    for member in &cluster.members {
        for counter in ["sent", "received"] {
            let name = format!("network_peer_{counter}_bytes_total");
            let bytes = member.gauge(&name).unwrap_or(0);
            assert!(bytes > 0, "{}: {name} is {bytes}", member.name);
        }
    }
}

/// Rounds of leader kills: `CAPSTAN_CHAOS_ROUNDS` (`make chaos`), else 1.
fn chaos_rounds() -> usize {
    std::env::var("CAPSTAN_CHAOS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_leader_under_writes_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let mut failovers = Vec::new();
    for round in 0..chaos_rounds() {
        failovers.push(kill_leader_under_writes(&mut cluster, &format!("w{round}")).await);
    }
    failovers.sort();
    println!(
        "failover after kill -9 of the leader: median {:?} over {} kills ({failovers:?})",
        failovers[failovers.len() / 2],
        failovers.len()
    );
}

/// The same guarantee when members talk to clients and to each other over
/// TLS with client certificates required (as `make cluster` and compose
/// run them): raft traffic and the writers' gRPC both go through rustls.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_leader_of_a_tls_cluster_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start_tls(dir.path(), 3, &[]);
    assert!(cluster.urls().iter().all(|url| url.starts_with("https://")));
    let failover = kill_leader_under_writes(&mut cluster, "tls").await;
    println!("TLS cluster: first write {failover:?} after kill -9 of the leader");
}

/// One round: writers on every member, kill -9 the leader, check every
/// acknowledged write survived, restart the member and wait until it has
/// caught up. Returns the time from the kill to the first acknowledged write.
async fn kill_leader_under_writes(cluster: &mut Cluster, prefix: &str) -> Duration {
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::default()));
    let writers = spawn_writers(cluster.urls(), 8, prefix, stop.clone(), history.clone());
    wait_acked(&history, 8, WRITES).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10));
    let killed_at = Instant::now();
    cluster.members[leader].kill9();
    let resumed = wait_resumed(&history, killed_at, WRITES).await;
    println!("{prefix}: writes resumed {resumed:?} after the kill");
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    let history = history.lock().await;
    history.check_failures(prefix);
    // The first write *sent* after the kill that succeeded: writes already
    // committed before the kill may still be answered just after it.
    let first_after = history
        .acked
        .iter()
        .filter(|a| a.2 > killed_at)
        .map(|a| a.3)
        .min();
    let failover = first_after.expect("writes resumed after the kill") - killed_at;
    println!(
        "{prefix}: {} puts acknowledged, {} failed; first write {failover:?} after the kill",
        history.acked.len(),
        history.failed.len()
    );
    let stored = stored(&cluster.running_urls(), &format!("{prefix}-")).await;
    for (key, rev, _, _) in &history.acked {
        assert_eq!(stored.get(key), Some(rev), "acknowledged put of {key} lost");
    }
    cluster.members[leader].start();
    wait_converged(&cluster.urls(), Duration::from_secs(20)).await;
    failover
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_leader_commits_nothing_and_its_failed_writes_stay_failed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let leader = cluster.leader().expect("a leader");
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::default()));
    let leader_url = vec![cluster.members[leader].url()];
    let writers = spawn_writers(leader_url, 4, "p", stop.clone(), history.clone());
    wait_acked(&history, 4, WRITES).await;
    cluster.members[leader].signal("STOP");
    let others: Vec<String> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| cluster.members[i].url())
        .collect();
    let mut client = connect(&others).await;
    let during_rev = put_until_ok(&mut client, "during-pause", Duration::from_secs(20)).await;
    // Every writer's put to the paused leader times out: failed writes
    // that must stay failed.
    let failing = wait_failed(&history, 4, WRITES).await;
    println!("paused leader: its writers' puts failed within {failing:?}");
    cluster.members[leader].signal("CONT");
    let continued = Instant::now();
    let old = &cluster.members[leader];
    let what = "the paused leader to step down and follow the new one";
    wait_for(WRITES, what, || {
        (!old.is_leader() && old.gauge("has_leader") == Some(1)).then_some(())
    });
    println!(
        "paused leader: a follower {:?} after SIGCONT",
        continued.elapsed()
    );
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    let history = history.lock().await;
    history.check_failures("paused leader");
    let stored = stored(&others, "p-").await;
    for (key, rev, _, _) in &history.acked {
        assert_eq!(stored.get(key), Some(rev), "acknowledged put of {key} lost");
    }
    // A definite failure (see `classify`) must never show up later. A
    // time-out is, as in etcd, an unknown outcome and may have committed.
    let definite: Vec<_> = history
        .failed
        .iter()
        .filter(|(_, _, class)| *class == "definite")
        .collect();
    println!(
        "paused leader: {} acknowledged, {} failed ({} definitely)",
        history.acked.len(),
        history.failed.len(),
        definite.len()
    );
    for (key, err, _) in definite {
        assert!(
            !stored.contains_key(key),
            "failed put of {key} ({err}) resurrected"
        );
    }
    let revisions: Vec<i64> = history.acked.iter().map(|a| a.1).collect();
    assert!(
        !revisions.contains(&during_rev),
        "two writes acknowledged at one revision"
    );
    wait_converged(&cluster.urls(), Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_members_survive_two_losses_and_refuse_writes_after_three() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 5, &[]);
    let leader = cluster.leader().unwrap();
    let other = (leader + 1) % 5;
    cluster.members[leader].kill9();
    cluster.members[other].kill9();
    let mut client = connect(&cluster.running_urls()).await;
    put_until_ok(&mut client, "after-two", Duration::from_secs(20)).await;

    let third = (0..5).find(|i| cluster.members[*i].is_running()).unwrap();
    cluster.members[third].kill9();
    let mut client = connect(&cluster.running_urls()).await;
    let started = Instant::now();
    let err = client
        .put("after-three", "v", None)
        .await
        .expect_err("no quorum");
    println!(
        "write without quorum failed after {:?}: {err}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(
        text.contains("etcdserver: no leader") || text.contains("etcdserver: request timed out"),
        "unexpected error: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_watch_on_a_follower_sees_every_event_once_in_order_across_a_leader_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let leader = cluster.leader().unwrap();
    let follower = (leader + 1) % 3;
    let mut watch_client = connect(&[cluster.members[follower].url()]).await;
    let mut stream = watch_client
        .watch("e-", Some(WatchOptions::new().with_prefix()))
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::default()));
    let writers = spawn_writers(cluster.urls(), 4, "e", stop.clone(), history.clone());
    wait_acked(&history, 4, WRITES).await;
    let killed_at = Instant::now();
    cluster.members[leader].kill9();
    let resumed = wait_resumed(&history, killed_at, WRITES).await;
    println!("watch across a leader kill: writes resumed {resumed:?} after it");
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    history
        .lock()
        .await
        .check_failures("watch across a leader kill");
    let acked: HashMap<String, i64> = history
        .lock()
        .await
        .acked
        .iter()
        .map(|(k, r, _, _)| (k.clone(), *r))
        .collect();
    let mut seen: HashMap<String, i64> = HashMap::new();
    let mut last_rev = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while acked.keys().any(|k| !seen.contains_key(k)) {
        assert!(Instant::now() < deadline, "watch missed events");
        let resp = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("watch stalled")
            .unwrap()
            .expect("watch open");
        for event in resp.events() {
            let kv = event.kv().unwrap();
            assert!(kv.mod_revision() > last_rev, "event out of order");
            last_rev = kv.mod_revision();
            let key = kv.key_str().unwrap().to_string();
            assert!(
                seen.insert(key.clone(), kv.mod_revision()).is_none(),
                "{key} delivered twice"
            );
        }
    }
    for (key, rev) in &acked {
        assert_eq!(seen.get(key), Some(rev));
    }
}

/// etcd's "require leader" contract: a member cut off from the others (here
/// they are stopped) refuses requests that carry `hasleader: true` and
/// ends such watch streams with "no leader", so a client (like the API
/// server) moves to a member that can see the cluster; a watch without the
/// metadata is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_without_a_leader_ends_watches_that_require_one() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let leader = cluster.wait_for_leader(Duration::from_secs(20));
    let alone = (leader + 1) % 3;
    let url = cluster.members[alone].url();
    let options = ConnectOptions::new().with_require_leader(true);
    let mut strict = Client::connect([url.as_str()], Some(options))
        .await
        .unwrap();
    let mut plain = connect(std::slice::from_ref(&url)).await;
    let mut strict_events = strict.watch("moving", None).await.unwrap();
    let mut plain_events = plain.watch("moving", None).await.unwrap();
    let mut writer = connect(&[cluster.members[leader].url()]).await;
    writer.put("moving", "1", None).await.unwrap();
    for events in [&mut strict_events, &mut plain_events] {
        // The `created` answer comes first, then the event.
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), events.message()).await;
            let response = next
                .expect("an answer in time")
                .expect("no error")
                .expect("open");
            if !response.events().is_empty() {
                break;
            }
        }
    }

    for (i, member) in cluster.members.iter().enumerate() {
        if i != alone {
            member.signal("STOP");
        }
    }
    let ended = tokio::time::timeout(Duration::from_secs(30), strict_events.message()).await;
    let refused = strict.get("moving", None).await;
    let plain_open = tokio::time::timeout(Duration::from_millis(500), plain_events.message()).await;
    for (i, member) in cluster.members.iter().enumerate() {
        if i != alone {
            member.signal("CONT");
        }
    }
    let err = match ended {
        Ok(Err(err)) => err.to_string(),
        other => panic!("the watch should end with an error: {other:?}"),
    };
    assert!(err.contains("no leader"), "{err}");
    let refused = refused.expect_err("a request that requires a leader is refused");
    assert!(refused.to_string().contains("no leader"), "{refused}");
    assert!(
        plain_open.is_err(),
        "a plain watch stays open and quiet: {plain_open:?}"
    );
}
