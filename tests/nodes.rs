//! Simulated nodes (`capstan-nodes`) against `capstan`, driven with
//! kubectl and curl: three nodes register Ready across three zones and
//! renew their Leases; a pod bound to a node goes Running and Ready;
//! Job-like pods finish Succeeded or Failed with the annotated exit code;
//! a pod too big for its node is refused (OutOfcpu); `kubectl top`
//! answers through the aggregator; the kubelet API serves a container's
//! log; a deleted pod goes away; a stopped node's Lease lapses and
//! renews once it starts again; a Ready condition set Unknown by another
//! writer is reported True again; `kill -9` of the nodes process keeps
//! the pods, and a new process takes its nodes back.
//!
//! `heartbeat_cost` (ignored; `NODES=5000 cargo test -p capstan-tests
//! --test nodes heartbeat_cost -- --ignored --nocapture`) prints the API
//! server's CPU while N nodes hold their Leases.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiCluster, Backend, Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// `capstan-nodes` with `args` against `capstan`, logging into its folder.
fn start_nodes(capstan: &Embedded, args: &[&str]) -> SimNodes {
    SimNodes::start_serving_metrics(capstan.dir.path(), &capstan.kubectl, args)
}

fn json(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl's JSON")
}

fn ready_nodes(kubectl: &Kubectl) -> Vec<Value> {
    let list = json(kubectl, &["get", "nodes"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .cloned()
        .collect()
}

fn wait_ready_nodes(kubectl: &Kubectl, count: usize, nodes: &SimNodes) -> Vec<Value> {
    let what = format!("{count} Ready nodes");
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = ready_nodes(kubectl);
        if ready.len() >= count {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "no {what}; log:\n{}",
            nodes.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn phase(kubectl: &Kubectl, pod: &str) -> Option<String> {
    let output = kubectl.run(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"]);
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).to_string())
}

fn wait_phase(kubectl: &Kubectl, pod: &str, want: &str) -> Value {
    wait_for(WAIT, &format!("pod {pod} {want}"), || {
        (phase(kubectl, pod).as_deref() == Some(want)).then_some(())
    });
    json(kubectl, &["get", "pod", pod])
}

fn create(kubectl: &Kubectl, yaml: &str) {
    kubectl.ok_with_input(&["apply", "-f", "-"], yaml);
}

fn pod_yaml(name: &str, node: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{extra}spec:\n  nodeName: {node}\n  restartPolicy: Never\n  containers:\n  - name: app\n    image: busybox\n"
    )
}

fn renew_time(kubectl: &Kubectl, node: &str) -> String {
    kubectl.ok(&[
        "get",
        "lease",
        "-n",
        "kube-node-lease",
        node,
        "-o",
        "jsonpath={.spec.renewTime}",
    ])
}

#[test]
fn three_nodes_register_heartbeat_and_run_pods() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let nodes = start_nodes(
        &capstan,
        &[
            "--nodes",
            "3",
            "--zones",
            "zone-a,zone-b,zone-c",
            "--name-prefix",
            "sim-",
        ],
    );
    let web = nodes_run_pods(kubectl, &nodes);

    let top = wait_for(WAIT, "kubectl top pods", || {
        let output = kubectl.run(&["top", "pods", "-l", "app=web"]);
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).to_string())
    });
    assert!(
        top.lines()
            .any(|l| l.starts_with("web") && l.contains("250m") && l.contains("64Mi")),
        "{top}"
    );
    let top_nodes = kubectl.ok(&["top", "nodes"]);
    assert!(
        top_nodes
            .lines()
            .any(|l| l.starts_with("sim-1 ") && l.contains("350m")),
        "{top_nodes}"
    );

    let log = kubelet_log(&capstan, &web, "default/web/app");
    assert!(
        log.contains(
            "capstan-nodes: container app (docker.io/library/nginx:latest) started on node sim-1"
        ),
        "{log}"
    );

    kubectl.ok(&["delete", "pod", "web", "--timeout=60s"]);
    assert!(!kubectl.run(&["get", "pod", "web"]).status.success());
}

/// The same on capstan-apiserver over a real etcd.
#[test]
fn three_nodes_run_pods_on_etcd() {
    let cluster = ApiCluster::start_on(Backend::Etcd);
    let kubectl = &cluster.kubectl;
    let args = [
        "--nodes",
        "3",
        "--zones",
        "zone-a,zone-b,zone-c",
        "--name-prefix",
        "sim-",
        "--register-metrics-api",
        "false",
    ];
    let nodes = SimNodes::start_serving_metrics(cluster.dir.path(), kubectl, &args);
    nodes_run_pods(kubectl, &nodes);
    kubectl.ok(&["delete", "pod", "web", "--timeout=60s"]);
    assert!(!kubectl.run(&["get", "pod", "web"]).status.success());
}

/// Nodes sim-0..2 Ready across three zones; pods run, finish, are
/// refused; Leases renew. Returns the running pod `web` (on sim-1).
fn nodes_run_pods(kubectl: &Kubectl, nodes: &SimNodes) -> Value {
    let ready = wait_ready_nodes(kubectl, 3, nodes);
    let mut zones: Vec<&str> = ready
        .iter()
        .map(|n| {
            n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                .as_str()
                .unwrap()
        })
        .collect();
    zones.sort();
    assert_eq!(zones, ["zone-a", "zone-b", "zone-c"]);
    let cidrs: std::collections::BTreeSet<&str> = ready
        .iter()
        .map(|n| n["spec"]["podCIDR"].as_str().unwrap())
        .collect();
    assert_eq!(cidrs.len(), 3, "each node has its own pod CIDR");
    assert_eq!(ready[0]["status"]["capacity"]["cpu"], "32");
    assert_eq!(
        ready[0]["status"]["nodeInfo"]["kubeletVersion"],
        "v1.32.0-capstan"
    );

    create(kubectl, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  nodeName: sim-1\n  containers:\n  - name: app\n    image: nginx\n    resources: {requests: {cpu: 250m, memory: 64Mi}}\n");
    kubectl.ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    let web = json(kubectl, &["get", "pod", "web"]);
    assert_eq!(web["status"]["phase"], "Running");
    let ip = web["status"]["podIP"].as_str().unwrap();
    let cidr = ready
        .iter()
        .find(|n| n["metadata"]["name"] == "sim-1")
        .unwrap()["spec"]["podCIDR"]
        .as_str()
        .unwrap();
    assert!(
        ip.starts_with(cidr.trim_end_matches("0/24")),
        "{ip} in {cidr}"
    );
    assert_eq!(web["status"]["containerStatuses"][0]["ready"], true);

    create(kubectl, &pod_yaml("done", "sim-0", ""));
    create(
        kubectl,
        &pod_yaml(
            "fails",
            "sim-2",
            "  annotations: {nodes.capstan.dev/exit-code: \"3\"}\n",
        ),
    );
    let done = wait_phase(kubectl, "done", "Succeeded");
    assert_eq!(
        done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    let fails = wait_phase(kubectl, "fails", "Failed");
    assert_eq!(
        fails["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );

    create(kubectl, "apiVersion: v1\nkind: Pod\nmetadata: {name: huge}\nspec:\n  nodeName: sim-0\n  containers:\n  - name: app\n    image: nginx\n    resources: {requests: {cpu: \"64\"}}\n");
    let huge = wait_phase(kubectl, "huge", "Failed");
    assert_eq!(huge["status"]["reason"], "OutOfcpu");
    assert_eq!(
        huge["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 64000, used: 0, capacity: 32000"
    );

    // The first renewals are spread over one interval.
    wait_for(Duration::from_secs(30), "sim-0's Lease", || {
        let get = ["get", "lease", "-n", "kube-node-lease", "sim-0"];
        kubectl.run(&get).status.success().then_some(())
    });
    let first = renew_time(kubectl, "sim-0");
    wait_for(Duration::from_secs(30), "sim-0's Lease renewed", || {
        (renew_time(kubectl, "sim-0") != first).then_some(())
    });
    let lease = json(kubectl, &["get", "lease", "-n", "kube-node-lease", "sim-0"]);
    assert_eq!(lease["spec"]["holderIdentity"], "sim-0");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");

    web
}

/// A container's log straight from the node's kubelet endpoint, with the
/// admin's client certificate (what the API server's pods/log will do).
fn kubelet_log(capstan: &Embedded, pod: &Value, path: &str) -> String {
    let node = pod["spec"]["nodeName"].as_str().unwrap();
    let kubectl = &capstan.kubectl;
    let port = kubectl.ok(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}",
    ]);
    let pki: PathBuf = capstan.dir.path().join("data").join("pki");
    let file = |name: &str| pki.join(name).display().to_string();
    let url = format!("https://127.0.0.1:{port}/containerLogs/{path}?timestamps=true");
    let output = Command::new("curl")
        .args([
            "-sS",
            "--insecure",
            "--cert",
            &file("admin.crt"),
            "--key",
            &file("admin.key"),
            &url,
        ])
        .output()
        .expect("run curl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

#[test]
fn a_stopped_node_lets_its_lease_lapse_and_renews_when_started() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let nodes = start_nodes(&capstan, &["--nodes", "2", "--name-prefix", "stop-"]);
    wait_ready_nodes(kubectl, 2, &nodes);
    // Both Leases: the nodes write theirs independently, so one existing
    // says nothing about the other.
    wait_for(Duration::from_secs(30), "both nodes' Leases", || {
        ["stop-0", "stop-1"]
            .iter()
            .all(|node| {
                kubectl
                    .run(&["get", "lease", "-n", "kube-node-lease", node])
                    .status
                    .success()
            })
            .then_some(())
    });
    let answer: Value = serde_json::from_str(&nodes.admin("POST", "/nodes/stop-0/stop")).unwrap();
    assert_eq!(answer["changed"], true);
    let listed: Value = serde_json::from_str(&nodes.admin("GET", "/nodes")).unwrap();
    assert_eq!(
        listed["nodes"][0],
        serde_json::json!({"name": "stop-0", "running": false})
    );
    let stopped_at = renew_time(kubectl, "stop-0");
    let other = renew_time(kubectl, "stop-1");
    // Longer than a renewal interval (10 s and up to 4% jitter): the
    // running node renews, the stopped one does not.
    wait_for(Duration::from_secs(30), "stop-1's Lease renewed", || {
        (renew_time(kubectl, "stop-1") != other).then_some(())
    });
    std::thread::sleep(Duration::from_secs(11));
    assert_eq!(
        renew_time(kubectl, "stop-0"),
        stopped_at,
        "a stopped node renews nothing"
    );
    nodes.admin("POST", "/nodes/stop-0/start");
    wait_for(
        Duration::from_secs(10),
        "stop-0 renews once started",
        || (renew_time(kubectl, "stop-0") != stopped_at).then_some(()),
    );
    assert!(nodes
        .admin("POST", "/nodes/none/stop")
        .contains("no node \"none\""));
}

/// The node lifecycle controller sets a node's Ready condition Unknown
/// while the node cannot reach the API; once it can, the node reports
/// Ready again at its next status check instead of trusting what it
/// last sent (which still says Ready).
#[test]
fn a_node_whose_ready_condition_someone_else_changed_reports_it_again() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let nodes = start_nodes(&capstan, &["--nodes", "1", "--name-prefix", "outage-"]);
    wait_ready_nodes(kubectl, 1, &nodes);
    let unknown = r#"{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status."}]}}"#;
    kubectl.ok(&[
        "patch",
        "node",
        "outage-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        unknown,
    ]);
    let ready = || {
        kubectl.ok(&[
            "get",
            "node",
            "outage-0",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ])
    };
    assert_eq!(ready(), "Unknown");
    wait_for(Duration::from_secs(40), "outage-0 Ready again", || {
        (ready() == "True").then_some(())
    });
}

#[test]
fn pods_outlive_a_killed_nodes_process_and_a_new_one_takes_over() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let args = ["--nodes", "1", "--name-prefix", "keep-", "--pods", "2"];
    let mut nodes = start_nodes(&capstan, &args);
    wait_ready_nodes(kubectl, 1, &nodes);
    create(kubectl, "apiVersion: v1\nkind: Pod\nmetadata: {name: long}\nspec:\n  nodeName: keep-0\n  containers: [{name: app, image: nginx}]\n");
    let before = wait_phase(kubectl, "long", "Running");
    nodes.kill();
    let cidr = json(kubectl, &["get", "node", "keep-0"])["spec"]["podCIDR"].clone();
    let nodes = start_nodes(&capstan, &args);
    wait_ready_nodes(kubectl, 1, &nodes);
    assert_eq!(
        json(kubectl, &["get", "node", "keep-0"])["spec"]["podCIDR"],
        cidr
    );
    // The running pod is counted again: with --pods 2, one more fits and
    // the next is refused.
    create(kubectl, "apiVersion: v1\nkind: Pod\nmetadata: {name: second}\nspec:\n  nodeName: keep-0\n  containers: [{name: app, image: nginx}]\n");
    create(kubectl, "apiVersion: v1\nkind: Pod\nmetadata: {name: third}\nspec:\n  nodeName: keep-0\n  containers: [{name: app, image: nginx}]\n");
    let second = wait_phase(kubectl, "second", "Running");
    let third = wait_phase(kubectl, "third", "Failed");
    assert_eq!(third["status"]["reason"], "OutOfpods");
    let after = json(kubectl, &["get", "pod", "long"]);
    assert_eq!(after["status"]["podIP"], before["status"]["podIP"]);
    assert_eq!(
        after["status"]["containerStatuses"][0]["containerID"],
        before["status"]["containerStatuses"][0]["containerID"]
    );
    assert_ne!(second["status"]["podIP"], before["status"]["podIP"]);
}

/// CPU seconds a process has used (user and system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    let after_name = stat.rsplit_once(')').expect("a stat line").1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
#[ignore = "a measurement: NODES=5000 ... heartbeat_cost -- --ignored --nocapture"]
fn heartbeat_cost() {
    let count: usize = std::env::var("NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let seconds: u64 = std::env::var("SECONDS_MEASURED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60);
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let nodes = start_nodes(
        &capstan,
        &[
            "--nodes",
            &count.to_string(),
            "--name-prefix",
            "hb-",
            "--register-metrics-api",
            "false",
        ],
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    loop {
        let leases = kubectl.ok(&["get", "leases", "-n", "kube-node-lease", "--no-headers"]);
        if leases.lines().count() >= count {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every node holds a Lease; log:\n{}",
            nodes.log_text()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    println!(
        "{count} nodes hold their Leases {:.1} s after start",
        started.elapsed().as_secs_f64()
    );
    // Let the start-up writes settle, then measure a steady window.
    std::thread::sleep(Duration::from_secs(15));
    let (api_before, nodes_before) = (cpu_seconds(capstan.pid()), cpu_seconds(nodes.process.pid()));
    let window = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let elapsed = window.elapsed().as_secs_f64();
    let api = (cpu_seconds(capstan.pid()) - api_before) / elapsed;
    let sim = (cpu_seconds(nodes.process.pid()) - nodes_before) / elapsed;
    println!(
        "heartbeats of {count} nodes over {elapsed:.0} s: capstan (API server + store) {:.1}% of a core, capstan-nodes {:.1}% of a core",
        api * 100.0,
        sim * 100.0
    );
}
