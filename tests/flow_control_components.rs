//! Where API Priority and Fairness puts the control plane's own clients.
//! `capstan`'s controller manager (its informers as
//! `system:kube-controller-manager`, each controller as its
//! `kube-system` service account), its scheduler (`system:kube-scheduler`)
//! and its simulated nodes (`system:node:<name>` in `system:nodes`)
//! authenticate as kube's components do, so kube's suggested FlowSchemas
//! classify them as on a real cluster: leader election apart from the
//! workloads, node heartbeats on their own level, and none of them in
//! the levels meant for everyone else. Read from the server's
//! `apiserver_flowcontrol_dispatched_requests_total`, on a cluster whose
//! only other client is the admin (exempt).

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::http::Connection;
use capstan_tests::poll::wait_for;
use capstan_tests::watchdog;

/// (FlowSchema, priority level) -> requests dispatched.
type Dispatched = BTreeMap<(String, String), u64>;

/// The dispatched counts from the server's metrics, and the text itself.
fn dispatched(port: u16) -> (Dispatched, String) {
    let response = Connection::connect(port)
        .expect("connect")
        .send("GET", "/metrics", &[], b"")
        .expect("GET /metrics");
    assert_eq!(response.status, 200);
    let text = String::from_utf8_lossy(&response.body).to_string();
    let mut counts = Dispatched::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_flowcontrol_dispatched_requests_total{")
        else {
            continue;
        };
        let (labels, value) = rest.split_once("} ").expect("a sample");
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .expect("the label")
        };
        let value: f64 = value.trim().parse().expect("a number");
        counts.insert(
            (label("flow_schema"), label("priority_level")),
            value as u64,
        );
    }
    (counts, text)
}

/// Where each component's requests must land (schema, level), as kube
/// puts them.
const EXPECTED: [(&str, &str, &str); 6] = [
    (
        "the controller manager's informers",
        "kube-controller-manager",
        "workload-high",
    ),
    (
        "the controllers' writes",
        "kube-system-service-accounts",
        "workload-high",
    ),
    ("the scheduler", "kube-scheduler", "workload-high"),
    (
        "leader election",
        "system-leader-election",
        "leader-election",
    ),
    ("node Leases and status", "system-node-high", "node-high"),
    ("the nodes' pods", "system-nodes", "system"),
];

/// Where kube also puts some of them: its `workload-leader-election`
/// schema takes every ConfigMap, Endpoints and Lease read or write of a
/// kube-system service account (the root CA publisher's ConfigMaps too).
const ALSO_ALLOWED: [(&str, &str); 2] = [
    ("workload-leader-election", "leader-election"),
    ("endpoint-controller", "workload-high"),
];

#[test]
fn the_components_land_in_kubes_flow_schemas() {
    let _watchdog = watchdog::arm();
    let capstan = Embedded::start_with(&["--simulated-nodes", "2"]);
    let kubectl = &capstan.kubectl;
    kubectl.ok(&[
        "create",
        "deployment",
        "web",
        "--image=registry.k8s.io/pause:3.10",
        "--replicas=2",
    ]);
    wait_for(
        Duration::from_secs(90),
        "two Ready pods of the Deployment",
        || {
            let out = kubectl.ok(&[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.readyReplicas}",
            ]);
            (out.trim() == "2").then_some(())
        },
    );
    // Node Leases are renewed every 10 s, the leaders' every 2 s.
    let (counts, text) = wait_for(
        Duration::from_secs(60),
        "every component's requests",
        || {
            let (counts, text) = dispatched(capstan.port);
            let all = EXPECTED.iter().all(|(_, schema, level)| {
                counts
                    .get(&(schema.to_string(), level.to_string()))
                    .copied()
                    .unwrap_or(0)
                    > 0
            });
            all.then_some((counts, text))
        },
    );
    for (schema, level) in counts.keys() {
        let expected = EXPECTED.iter().any(|(_, s, l)| s == schema && l == level);
        let admin_or_probe = level == "exempt";
        let also = ALSO_ALLOWED.iter().any(|(s, l)| s == schema && l == level);
        assert!(
            expected || admin_or_probe || also,
            "requests classified by {schema} at {level}: only the components' schemas and exempt \
             (the admin's) should have any here:\n{text}"
        );
    }
}
