//! The Kubernetes API under store faults: two `capstan-apiserver`s on a
//! 3-member `capstan-store` cluster, kube-rs clients creating, reading,
//! updating with resourceVersion, merge-patching, deleting and listing
//! ConfigMaps through both, and two REST watchers that resume on the
//! other API server each time a watch ends, while the store's leader (and
//! a follower) is killed, paused, slowed and cut off from its peers, and
//! an API server is cut off from a store member it uses (the leader when
//! it uses it) or killed and restarted.
//! Afterwards the history must be linearizable per object (final reads
//! included, so an acknowledged write that vanished fails), and each
//! watcher's stream, resumed at its last resourceVersion, must be ordered,
//! unique and hold every acknowledged write, deletions included; both
//! must agree. An error that is not an unknown outcome fails the run; so
//! does an advertised fault kind that never took effect, and a violation
//! planted in this run's own history that the checks miss.
//! Duration: `CAPSTAN_FAULT_SECONDS` (default 30, longer if needed to fit
//! every kind in); order: `CAPSTAN_FAULT_SEED`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::checker::plant;
use capstan_tests::checker::verify::{verify, Run};
use capstan_tests::checker::watch::Event;
use capstan_tests::cluster::Cluster;
use capstan_tests::faults::apiserver::ApiProcess;
use capstan_tests::faults::report::Report;
use capstan_tests::faults::schedule::{self, FaultKind, Settings, Targets};
use capstan_tests::faults::Network;
use capstan_tests::history;
use capstan_tests::history_kube::{self, configmap, KubeTraffic, RestWatcher};
use kube::api::{ListParams, PostParams};

const CLIENTS: usize = 4;
const FINISH: Duration = Duration::from_secs(90);
const STORE_FAULTS: [FaultKind; 9] = [
    FaultKind::KillLeader,
    FaultKind::SlowDiskLeader,
    FaultKind::CutApiServerFromStore,
    FaultKind::KillApiServer,
    FaultKind::IsolateLeader,
    FaultKind::PauseLeader,
    FaultKind::DeafenLeader,
    FaultKind::KillFollower,
    FaultKind::IsolateFollower,
];

#[test]
fn the_kubernetes_api_stays_linearizable_and_watches_stay_whole_under_store_faults() {
    let settings = Settings::from_env();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Failpoints on: the schedule slows members' disks.
    let mut cluster = Cluster::start(dir.path(), 3, &["--experimental-enable-failpoints"]);
    let network = settings
        .partitions
        .then(|| Network::new(&cluster).expect("set up partitions (root, iptables, cgroup v2)"));
    let urls = cluster.urls();
    let reversed: Vec<String> = urls.iter().rev().cloned().collect();
    let mut apis = [
        ApiProcess::start(&urls, dir.path(), "api-a"),
        ApiProcess::start(&reversed, dir.path(), "api-b"),
    ];
    let ports: Vec<u16> = apis.iter().map(|a| a.port).collect();
    let start: i64 = runtime.block_on(async {
        let list = history_kube::configmaps(ports[0])
            .list(&ListParams::default())
            .await
            .expect("list ConfigMaps before the run");
        list.metadata.resource_version.unwrap().parse().unwrap()
    });

    let traffic = Arc::new(KubeTraffic::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| runtime.spawn(history_kube::client(id, ports.clone(), traffic.clone())))
        .collect();
    let watchers: Vec<Arc<RestWatcher>> = (0..2).map(|_| Arc::default()).collect();
    let watching: Vec<_> = watchers
        .iter()
        .enumerate()
        .map(|(i, w)| runtime.spawn(w.clone().run(ports.clone(), i, start)))
        .collect();

    let targets = Targets {
        cluster: &mut cluster,
        network: network.as_ref(),
        api_servers: &mut apis,
        endpoints: None,
    };
    let faults = schedule::run(targets, &traffic.recorder, &STORE_FAULTS, &settings);

    traffic.stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for client in clients {
            tokio::time::timeout(FINISH, client)
                .await
                .expect("a client did not stop")
                .expect("a client panicked");
        }
    });
    cluster.wait_for_leader(FINISH);
    let until = runtime.block_on(final_reads(&ports, &traffic));
    for watcher in &watchers {
        watcher.until.store(until, Ordering::Relaxed);
    }
    runtime.block_on(async {
        for task in watching {
            tokio::time::timeout(FINISH, task)
                .await
                .unwrap_or_else(|_| panic!("a REST watcher did not reach {until}"))
                .expect("a watcher panicked");
        }
    });

    let ops = traffic.recorder.operations();
    let mut report = Report::for_history("apiserver", "Kubernetes API", &ops, faults);
    let acked = traffic.acked.lock().unwrap().clone();
    let issued = traffic.issued.lock().unwrap().clone();
    let errors = traffic.errors.lock().unwrap().clone();
    let streams: Vec<Vec<Event>> = watchers
        .iter()
        .map(|w| w.events.lock().unwrap().clone())
        .collect();
    let findings = verify(&Run {
        ops: &ops,
        streams: &streams,
        acked: &acked,
        issued: &issued,
        errors: &errors,
        after: start,
        until,
        every_revision: false,
        plants: &plant::for_rest_watches(),
    });
    report.absorb(findings);
    for (i, watcher) in watchers.iter().enumerate() {
        let problems = watcher.problems.lock().unwrap().clone();
        report
            .violations
            .extend(problems.iter().map(|p| format!("REST watcher {i}: {p}")));
        let refused = watcher.refused.lock().unwrap().clone();
        if !refused.is_empty() {
            report.notes.push(format!(
                "REST watcher {i}: resumed elsewhere after {} refusals (410), e.g. {}",
                refused.len(),
                refused[0]
            ));
        }
    }
    report.notes.push(format!(
        "resourceVersions {start}..{until}; watch events {:?}; watches opened {:?}; bookmarks {:?}; acknowledged writes {}",
        streams.iter().map(Vec::len).collect::<Vec<_>>(),
        watchers.iter().map(|w| w.opened.load(Ordering::Relaxed)).collect::<Vec<_>>(),
        watchers.iter().map(|w| w.bookmarks.load(Ordering::Relaxed)).collect::<Vec<_>>(),
        acked.len()
    ));
    report.note_partitions(network.as_ref());
    report.publish();
    assert!(
        acked.len() > 30,
        "too few acknowledged writes: {}",
        acked.len()
    );
    assert!(report.violations.is_empty(), "violations found:\n{report}");
}

/// Lists through each API server and records the lists as reads, then
/// creates a marker object; its resourceVersion is where watchers stop.
async fn final_reads(ports: &[u16], traffic: &KubeTraffic) -> i64 {
    for &port in ports {
        let api = history_kube::configmaps(port);
        let call = traffic.recorder.now();
        let list = capstan_tests::poll::wait_for_async(FINISH, "a final list", || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.ok() }
        })
        .await;
        history_kube::record_list(&traffic.recorder, history::FINAL_READER, call, &list.items);
    }
    let api = history_kube::configmaps(ports[0]);
    let marker = configmap("end-marker", "end", None);
    let created = capstan_tests::poll::wait_for_async(FINISH, "the end marker", || {
        let (api, marker) = (api.clone(), marker.clone());
        async move {
            match api.create(&PostParams::default(), &marker).await {
                Ok(created) => Some(created),
                // An ambiguous first attempt may have created it.
                Err(_) => api.get("end-marker").await.ok(),
            }
        }
    })
    .await;
    created.metadata.resource_version.unwrap().parse().unwrap()
}
