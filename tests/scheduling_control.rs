//! The scheduler embedded in the API server: a malformed
//! KubeSchedulerConfiguration stops start-up naming the file and the
//! field (`capstan-apiserver` and `capstan`); with two API servers one
//! scheduler leads on the Lease `kube-system/kube-scheduler`, and when
//! its API server is killed the other's takes over (after the Lease's
//! 15 s) and schedules, on capstan-store and on a real etcd.

use std::process::Command;
use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiCluster, ApiServer, Backend};
use capstan_tests::kubectl::Kubectl;
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;
use capstan_tests::{binary, free_port};

const BAD_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1\n\
kind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  \
percentageOfNodesToScore: 300\n";

/// Runs `command` (which must exit by itself) and returns its stderr.
fn refused(command: &mut Command) -> String {
    let output = command.output().expect("run the binary");
    assert!(
        !output.status.success(),
        "started with a malformed configuration"
    );
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn a_malformed_scheduler_configuration_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scheduler.yaml");
    std::fs::write(&file, BAD_CONFIG).unwrap();
    let want = format!(
        "{}: profiles[0].percentageOfNodesToScore: Invalid value: 300: not in valid range [0-100]",
        file.display()
    );
    let apiserver = refused(
        Command::new(binary("capstan-apiserver"))
            .args(["--etcd-servers", "http://127.0.0.1:1", "--scheduler-config"])
            .arg(&file),
    );
    assert!(apiserver.contains(&want), "{apiserver}");
    let capstan = refused(
        Command::new(binary("capstan"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--secure-port", &free_port().to_string()])
            .args(["--store-port", &free_port().to_string()])
            .args(["--peer-port", &free_port().to_string()])
            .arg("--scheduler-config")
            .arg(&file),
    );
    assert!(capstan.contains(&want), "{capstan}");
}

#[test]
fn the_other_api_servers_scheduler_takes_over_on_capstan_store() {
    leader_election_moves(Backend::Capstan);
}

#[test]
fn the_other_api_servers_scheduler_takes_over_on_etcd() {
    leader_election_moves(Backend::Etcd);
}

const LEADING: &str = "became leader lease=kube-system/kube-scheduler";

fn leader_election_moves(backend: Backend) {
    let ApiCluster {
        api: first,
        store,
        dir,
        ..
    } = ApiCluster::start_on(backend);
    let second = ApiServer::start_with(&[store.url()], dir.path(), "apiserver-2", &[]);
    let leads = |server: &ApiServer| server.log_text().contains(LEADING);
    wait_for(Duration::from_secs(60), "a scheduler leading", || {
        (leads(&first) || leads(&second)).then_some(())
    });
    assert!(
        !(leads(&first) && leads(&second)),
        "both schedulers lead at once"
    );
    let (leader, follower) = match leads(&first) {
        true => (first, second),
        false => (second, first),
    };
    let kubectl = Kubectl::new(dir.path(), follower.port);
    let holder = |kubectl: &Kubectl| {
        kubectl.ok(&[
            "get",
            "lease",
            "-n",
            "kube-system",
            "kube-scheduler",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
    };
    let before = holder(&kubectl);
    let _nodes = SimNodes::start(dir.path(), &kubectl, &["--nodes", "1"]);
    drop(leader);
    let killed = Instant::now();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: after-failover\nspec:\n  \
               containers:\n  - name: app\n    image: nginx\n";
    kubectl.ok_with_input(&["apply", "-f", "-"], pod);
    wait_for(
        Duration::from_secs(90),
        "the pod bound by the new leader",
        || {
            let node = kubectl.ok(&[
                "get",
                "pod",
                "after-failover",
                "-o",
                "jsonpath={.spec.nodeName}",
            ]);
            (!node.trim().is_empty()).then_some(())
        },
    );
    eprintln!("bound {:?} after the leader was killed", killed.elapsed());
    assert!(
        follower.log_text().contains(LEADING),
        "{}",
        follower.log_text()
    );
    assert_ne!(holder(&kubectl), before);
}
