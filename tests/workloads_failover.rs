//! The controllers never make more pods than asked, whatever their
//! caches' lag and whichever process leads: a ReplicaSet of 50 whose
//! controller sees pods 5 s late still gets exactly 50, and a scale to 200
//! during which the API server running the controllers is killed (the
//! other one takes the lease over) ends with exactly 200.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, ApiServer, Backend, Kubectl};
use capstan_tests::poll::wait_for;

capstan_tests::on_both_backends!(
    a_lagging_pod_cache_never_makes_a_replica_set_create_twice,
    killing_the_leading_apiserver_mid_scale_leaves_exactly_the_pods_asked_for,
);

const REPLICA_SET: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 50
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
"#;

fn pods(kubectl: &Kubectl, selector: &str) -> usize {
    let names = kubectl.ok(&["get", "pods", "-l", selector, "-o", "name"]);
    names.lines().filter(|l| !l.is_empty()).count()
}

/// Watches the count for `hold`, failing at once if it ever exceeds `want`.
fn holds(kubectl: &Kubectl, selector: &str, want: usize, hold: Duration) {
    let until = std::time::Instant::now() + hold;
    while std::time::Instant::now() < until {
        let count = pods(kubectl, selector);
        assert!(
            count <= want,
            "{count} pods for {selector}, more than {want}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(pods(kubectl, selector), want);
}

fn a_lagging_pod_cache_never_makes_a_replica_set_create_twice(backend: Backend) {
    let cluster = ApiCluster::start_with(backend, |_| {
        vec![
            "--experimental-controller-watch-delay".into(),
            "pods=5s".into(),
        ]
    });
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], REPLICA_SET);
    wait_for(Duration::from_secs(120), "50 pods", || {
        let count = pods(kubectl, "app=web");
        assert!(
            count <= 50,
            "{count} pods: the lagging cache made the controller create twice"
        );
        (count == 50).then_some(())
    });
    // The pods reach the controller's cache 5 s late: hold past that, and
    // past the status writes and resyncs it triggers.
    holds(kubectl, "app=web", 50, Duration::from_secs(15));
    let log = cluster.api.log_text();
    assert!(
        log.contains("failpoint: watch events reach the caches late"),
        "the failpoint was not on"
    );
}

/// Which of the two API servers' controller managers holds the lease.
fn leader<'a>(servers: &'a [&'a ApiServer]) -> &'a ApiServer {
    wait_for(
        Duration::from_secs(60),
        "a controller manager to lead",
        || {
            servers
                .iter()
                .copied()
                .find(|s| s.log_text().contains("became leader"))
        },
    )
}

fn killing_the_leading_apiserver_mid_scale_leaves_exactly_the_pods_asked_for(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let second = ApiServer::start_with(
        &[cluster.store.url()],
        cluster.dir.path(),
        "apiserver-b",
        &[],
    );
    let servers = [&cluster.api, &second];
    let leading = leader(&servers);
    let (survivor_port, survivor_log) = match leading.port == cluster.api.port {
        true => (second.port, second.log.clone()),
        false => (cluster.api.port, cluster.api.log.clone()),
    };
    let kubectl = Kubectl::new(cluster.dir.path(), survivor_port);
    kubectl.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=1",
    ]);
    wait_for(Duration::from_secs(60), "the first pod", || {
        (pods(&kubectl, "app=web") == 1).then_some(())
    });
    kubectl.ok(&["scale", "deployment", "web", "--replicas=200"]);
    // Mid-scale: some pods made, far from all (20 writes/s at most).
    wait_for(Duration::from_secs(60), "the scale under way", || {
        (pods(&kubectl, "app=web") >= 30).then_some(())
    });
    let killed = std::process::Command::new("kill")
        .args(["-9", &leading.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let mid = pods(&kubectl, "app=web");
    assert!(
        mid < 200,
        "the scale finished before the kill ({mid} pods): nothing was tested"
    );
    // The other manager takes the lease once it lapses (15 s) and finishes.
    wait_for(
        Duration::from_secs(180),
        "200 pods after the failover",
        || {
            let count = pods(&kubectl, "app=web");
            assert!(
                count <= 200,
                "{count} pods after the failover: created twice"
            );
            (count == 200).then_some(())
        },
    );
    holds(&kubectl, "app=web", 200, Duration::from_secs(10));
    let sets = kubectl.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
    assert_eq!(sets.lines().count(), 1, "{sets}");
    let log = std::fs::read_to_string(&survivor_log).unwrap_or_default();
    assert!(
        log.contains("became leader"),
        "the survivor never led:\n{log}"
    );
}
