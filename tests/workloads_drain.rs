//! `kubectl cordon`, `drain` and `uncordon` on `capstan` with two
//! simulated nodes, as a person runs them before taking a node down:
//! drain evicts through `pods/eviction`, so a PodDisruptionBudget with no
//! disruption to spare refuses it (429, kube's message), a server-side dry
//! run changes nothing, and once the budget is loosened the node empties
//! and its pods come back on the other node.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

fn json(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&all)).expect("kubectl prints JSON")
}

/// The live pods of app=web: (name, node, ready).
fn web_pods(kubectl: &Kubectl) -> Vec<(String, String, bool)> {
    let pods = json(kubectl, &["get", "pods", "-l", "app=web"]);
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
            let node = p["spec"]["nodeName"].as_str().unwrap_or("").to_string();
            (name, node, ready)
        })
        .collect()
}

/// Waits until the budget's status, for its current spec, allows `allowed`.
fn wait_budget(kubectl: &Kubectl, allowed: i64) {
    wait_for(WAIT, &format!("the budget to allow {allowed}"), || {
        let pdb = json(kubectl, &["get", "pdb", "web"]);
        let observed = pdb["status"]["observedGeneration"] == pdb["metadata"]["generation"];
        (observed && pdb["status"]["disruptionsAllowed"] == allowed).then_some(())
    });
}

fn unschedulable(kubectl: &Kubectl, node: &str) -> bool {
    let node = json(kubectl, &["get", "node", node]);
    node["spec"]["unschedulable"] == true
}

#[test]
fn drain_is_refused_by_a_budget_then_allowed_once_it_is_loosened() {
    let capstan = Embedded::start_with(&["--simulated-nodes", "2"]);
    let kubectl = &capstan.kubectl;
    kubectl.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    kubectl.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    kubectl.ok(&[
        "create",
        "poddisruptionbudget",
        "web",
        "--selector=app=web",
        "--min-available=2",
    ]);
    wait_budget(kubectl, 0);
    let node = web_pods(kubectl)[0].1.clone();
    let on_node: Vec<String> = web_pods(kubectl)
        .into_iter()
        .filter(|p| p.1 == node)
        .map(|p| p.0)
        .collect();

    kubectl.ok(&["cordon", &node]);
    assert!(unschedulable(kubectl, &node));
    let listed = kubectl.ok(&["get", "node", &node]);
    assert!(listed.contains("SchedulingDisabled"), "{listed}");

    let refused = kubectl.run(&["drain", &node, "--ignore-daemonsets", "--timeout=12s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "drain went through a full budget"
    );
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    let names: Vec<String> = web_pods(kubectl).into_iter().map(|p| p.0).collect();
    assert!(on_node.iter().all(|p| names.contains(p)), "{names:?}");

    kubectl.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":1}}"#,
    ]);
    wait_budget(kubectl, 1);
    // A server-side dry run evicts nothing and spends nothing.
    kubectl.ok(&["drain", &node, "--ignore-daemonsets", "--dry-run=server"]);
    let names: Vec<String> = web_pods(kubectl).into_iter().map(|p| p.0).collect();
    assert!(on_node.iter().all(|p| names.contains(p)), "{names:?}");
    wait_budget(kubectl, 1);

    let drained = kubectl.ok(&["drain", &node, "--ignore-daemonsets", "--timeout=120s"]);
    assert!(drained.contains("evicted"), "{drained}");
    assert!(drained.contains("drained"), "{drained}");
    wait_for(WAIT, "two ready pods, none on the drained node", || {
        let pods = web_pods(kubectl);
        let moved = pods.iter().all(|p| p.1 != node && p.2);
        (pods.len() == 2 && moved).then_some(())
    });
    kubectl.ok(&["uncordon", &node]);
    assert!(!unschedulable(kubectl, &node));
}
