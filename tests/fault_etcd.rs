//! The etcd API under faults: a 3-member `capstan-store` cluster on
//! loopback, clients doing put / linearizable get / compare-and-swap /
//! delete / a two-key transaction / lease grant-keepalive-revoke, and two
//! watchers on different members, while members are killed (one, the
//! leader, or all at once), paused (SIGSTOP/SIGCONT), cut off from the
//! others' peer links (both ways, or the leader deafened one way), and a
//! follower is replaced by a new member; a lease kept alive throughout
//! must not expire, and short leases left alone must expire, never early.
//! Afterwards the history must be linearizable per
//! key (final reads included, so an acknowledged write that vanished
//! fails), and each watcher's stream, resumed across member restarts,
//! must be ordered, unique, atomic per revision, gap-free and complete,
//! and equal to a third watcher's that replays the run from its start
//! revision afterwards, which also accounts for every revision of the
//! whole keyspace. An error that is not an unknown outcome fails the run;
//! so does an advertised fault kind that never took effect, and a
//! violation planted in this run's own history that the checks miss.
//! Duration: `CAPSTAN_FAULT_SECONDS` (default 30, longer if needed to fit
//! every kind in); order: `CAPSTAN_FAULT_SEED`.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::checker::plant::EVERY_PLANT;
use capstan_tests::checker::verify::{verify, Run};
use capstan_tests::checker::watch::Event;
use capstan_tests::cluster::Cluster;
use capstan_tests::faults::report::Report;
use capstan_tests::faults::schedule::{self, Settings, Targets, EVERY_FAULT};
use capstan_tests::faults::Network;
use capstan_tests::history::{self, Input, Output};
use capstan_tests::history_etcd::{self, Traffic, Watcher, PREFIX};
use capstan_tests::history_leases::{Expiries, EXPIRY_PREFIX};

const CLIENTS: usize = 4;
/// Generous deadlines for the end of a run on a loaded 2-core machine.
const FINISH: Duration = Duration::from_secs(90);

#[test]
fn the_etcd_api_stays_linearizable_and_watches_stay_whole_under_faults() {
    let settings = Settings::from_env();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The partition controls drop first (even on a panic): rules go, and
    // members still running move back to the root group.
    // Failpoints on: the schedule slows members' disks.
    let mut cluster = Cluster::start(dir.path(), 3, &["--experimental-enable-failpoints"]);
    let network = settings.partitions.then(|| {
        Network::new(&cluster).expect("set up partitions (needs root, iptables, cgroup v2)")
    });
    let urls = cluster.urls();
    let start = runtime.block_on(current_revision(&urls));

    let traffic = Traffic::new(urls.clone());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| runtime.spawn(history_etcd::client(id, traffic.clone())))
        .collect();
    let held = runtime.spawn(history_etcd::held_lease(traffic.clone()));
    let expiries = Arc::new(Expiries::default());
    let expiring = runtime.spawn(expiries.clone().run(traffic.clone()));
    let watchers: Vec<Arc<Watcher>> = (0..2).map(|_| Watcher::new()).collect();
    let watching: Vec<_> = watchers
        .iter()
        .enumerate()
        .map(|(i, w)| runtime.spawn(w.clone().run(traffic.clone(), i, start)))
        .collect();

    let targets = Targets {
        cluster: &mut cluster,
        network: network.as_ref(),
        api_servers: &mut [],
        endpoints: Some(&traffic.urls),
    };
    let faults = schedule::run(targets, &traffic.recorder, &EVERY_FAULT, &settings);

    traffic.stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for client in clients.into_iter().chain([held, expiring]) {
            tokio::time::timeout(FINISH, client)
                .await
                .expect("a client did not stop")
                .expect("a client panicked");
        }
    });
    cluster.wait_for_leader(FINISH);
    let urls = cluster.urls();
    runtime.block_on(expiries.finish(&urls, &traffic.recorder, FINISH));
    let until = runtime.block_on(final_reads(&urls, &traffic));
    for watcher in &watchers {
        watcher.until.store(until, Ordering::Relaxed);
    }
    // A third watcher, opened only now on the last member, replays the
    // whole run from the start revision out of the store's history, for
    // every key: a revision none of its events explain carried no change.
    let late = Watcher::of_all_keys();
    late.until.store(until, Ordering::Relaxed);
    let replay = runtime.spawn(late.clone().run(traffic.clone(), 2, start));
    let watchers = [watchers, vec![late]].concat();
    runtime.block_on(async {
        for task in watching.into_iter().chain([replay]) {
            tokio::time::timeout(FINISH, task)
                .await
                .unwrap_or_else(|_| panic!("a watcher did not reach revision {until}"))
                .expect("a watcher panicked");
        }
    });

    let ops = traffic.recorder.operations();
    let mut report = Report::for_history("etcd", "etcd API", &ops, faults);
    let acked = traffic.acked.lock().unwrap().clone();
    let issued = traffic.issued.lock().unwrap().clone();
    let errors = traffic.errors.lock().unwrap().clone();
    // A stream's last response may carry events past `until` (a lease
    // of the traffic expiring after the final reads); the runs compared
    // are those up to `until`, which every watcher reached.
    let mut streams: Vec<Vec<Event>> = watchers
        .iter()
        .map(|w| w.events.lock().unwrap().clone())
        .collect();
    let beyond: Vec<usize> = streams
        .iter_mut()
        .map(|events| {
            let before = events.len();
            events.retain(|e| e.revision <= until);
            before - events.len()
        })
        .collect();
    let everything = streams.pop().expect("the replaying watcher");
    streams.push(
        everything
            .iter()
            .filter(|e| e.key.starts_with(PREFIX))
            .cloned()
            .collect(),
    );
    let findings = verify(&Run {
        ops: &ops,
        streams: &streams,
        acked: &acked,
        issued: &issued,
        errors: &errors,
        after: start,
        until,
        every_revision: false,
        plants: &EVERY_PLANT,
    });
    report.absorb(findings);
    check_every_revision(&mut report, &everything, start, until);
    report
        .violations
        .extend(expiries.check_events(&everything, start, until));
    report.notes.push(format!(
        "revisions {start}..{until}; watch events {:?} (and past {until}: {beyond:?}); watch streams opened {:?}; acknowledged writes {}",
        streams.iter().map(Vec::len).collect::<Vec<_>>(),
        watchers.iter().map(|w| w.resumed.load(Ordering::Relaxed)).collect::<Vec<_>>(),
        acked.len()
    ));
    report.note_partitions(network.as_ref());
    report
        .notes
        .push(format!("leases: {:?}", traffic.leases.lock().unwrap()));
    report.notes.push(expiries.summary());
    report
        .violations
        .extend(expiries.violations.lock().unwrap().drain(..));
    report.publish();
    assert!(
        acked.len() > 50,
        "too few acknowledged writes to mean anything: {}",
        acked.len()
    );
    assert!(report.violations.is_empty(), "violations found:\n{report}");
}

/// Every revision must carry an event somewhere in the keyspace (etcd
/// never advances it otherwise), and every event must be the traffic's
/// or the expiring leases' (checked by `Expiries::check_events`): the
/// store writes no keys of its own, and nothing else in this test does.
fn check_every_revision(report: &mut Report, everything: &[Event], start: i64, until: i64) {
    let seen: HashSet<i64> = everything.iter().map(|e| e.revision).collect();
    let empty: Vec<i64> = (start + 1..=until).filter(|r| !seen.contains(r)).collect();
    if !empty.is_empty() {
        let violation = format!("revisions with no event in the whole keyspace: {empty:?}");
        report.violations.push(violation);
    }
    let outside: BTreeMap<i64, &str> = everything
        .iter()
        .filter(|e| !e.key.starts_with(PREFIX) && !e.key.starts_with(EXPIRY_PREFIX))
        .map(|e| (e.revision, e.key.as_str()))
        .collect();
    if !outside.is_empty() {
        let violation = format!(
            "revisions written outside {PREFIX} and {EXPIRY_PREFIX}, which nothing here writes: {outside:?}"
        );
        report.violations.push(violation);
    }
}

/// The cluster's revision, through any member that answers.
async fn current_revision(urls: &[String]) -> i64 {
    let mut etcd = history_etcd::connect(urls)
        .await
        .expect("connect to the cluster");
    let response = etcd
        .get(PREFIX, None)
        .await
        .expect("read the start revision");
    response.header().expect("a header").revision()
}

/// A linearizable read of every key the traffic touched, recorded into
/// the history (so the checker sees the final state); the revision the
/// last one read at.
async fn final_reads(urls: &[String], traffic: &Traffic) -> i64 {
    let keys: HashSet<String> = traffic
        .recorder
        .operations()
        .into_iter()
        .map(|op| op.key)
        .collect();
    let mut etcd = history_etcd::connect(urls)
        .await
        .expect("connect to the cluster");
    let mut revision = 0;
    for key in keys {
        let read = capstan_tests::poll::wait_for_async(FINISH, "a final read", || {
            let (mut etcd, key) = (etcd.clone(), key.clone());
            async move { etcd.get(key, None).await.ok() }
        });
        let call = traffic.recorder.now();
        let response = read.await;
        let value = response
            .kvs()
            .first()
            .map(|kv| kv.value_str().unwrap_or("").to_string());
        revision = revision.max(response.header().expect("a header").revision());
        traffic.recorder.record(
            history::FINAL_READER,
            &key,
            Input::Get,
            call,
            (Output::Get(value), None),
        );
    }
    etcd.get(PREFIX, None)
        .await
        .map(|r| r.header().map_or(revision, |h| h.revision()))
        .unwrap_or(revision)
}
