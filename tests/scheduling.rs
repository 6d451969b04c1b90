//! The scheduler where users run it: inside `capstan` (with its simulated
//! nodes) and inside `capstan-apiserver` over a real etcd (with a
//! `capstan-nodes` process), driven with kubectl. Pods, and a Deployment's
//! pods, run on capstan's defaults; spread across three zones; taints and
//! tolerations; required and preferred node affinity; inter-pod affinity
//! and anti-affinity; a pod too big for every node stays Pending with
//! kube's exact FailedScheduling message while others schedule; a pod for
//! another scheduler is left alone; preemption by PriorityClass. The
//! start-up and leader-election tests are in `scheduling_control.rs`.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Embedded};
use capstan_tests::kubectl::Kubectl;
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";

fn apply(kubectl: &Kubectl, object: &Value) {
    kubectl.ok_with_input(&["apply", "-f", "-"], &object.to_string());
}

fn get(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl's JSON")
}

/// A pod of one small container, with `spec` merged into its spec.
fn pod(name: &str, labels: Value, spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    });
    if let (Some(target), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        for (key, value) in extra {
            target.insert(key.clone(), value.clone());
        }
    }
    pod
}

fn node_of(kubectl: &Kubectl, pod: &str) -> Option<String> {
    let out = kubectl.run(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"]);
    let node = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !node.is_empty()).then_some(node)
}

fn wait_bound(kubectl: &Kubectl, pod: &str) -> String {
    wait_for(WAIT, &format!("pod {pod} bound"), || node_of(kubectl, pod))
}

fn wait_running(kubectl: &Kubectl, pod: &str) -> String {
    wait_for(WAIT, &format!("pod {pod} Running"), || {
        let phase = kubectl.run(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"]);
        (String::from_utf8_lossy(&phase.stdout) == "Running").then_some(())
    });
    wait_bound(kubectl, pod)
}

fn zone_of(kubectl: &Kubectl, node: &str) -> String {
    get(kubectl, &["get", "node", node])["metadata"]["labels"][ZONE]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The message of the pod's latest FailedScheduling event.
fn failed_scheduling(kubectl: &Kubectl, pod: &str) -> Option<String> {
    let selector = format!("involvedObject.name={pod},reason=FailedScheduling");
    let events = get(kubectl, &["get", "events", "--field-selector", &selector]);
    events["items"]
        .as_array()?
        .last()
        .and_then(|e| e["message"].as_str())
        .map(str::to_string)
}

fn wait_failed_scheduling(kubectl: &Kubectl, pod: &str) -> String {
    wait_for(WAIT, &format!("FailedScheduling for {pod}"), || {
        failed_scheduling(kubectl, pod)
    })
}

fn wait_ready_nodes(kubectl: &Kubectl, count: usize) {
    wait_for(WAIT, &format!("{count} Ready nodes"), || {
        let nodes = get(kubectl, &["get", "nodes"]);
        let ready = nodes["items"]
            .as_array()?
            .iter()
            .filter(|n| {
                n["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .count();
        (ready >= count).then_some(())
    });
}

#[test]
fn a_pod_runs_on_capstans_defaults() {
    let capstan = Embedded::start_with(&[]);
    let kubectl = &capstan.kubectl;
    apply(kubectl, &pod("web", json!({}), json!({})));
    let node = wait_running(kubectl, "web");
    assert_eq!(node, "capstan-simulated-0");
    let selector = "involvedObject.name=web,reason=Scheduled";
    let events = get(kubectl, &["get", "events", "--field-selector", selector]);
    assert_eq!(
        events["items"][0]["message"],
        "Successfully assigned default/web to capstan-simulated-0"
    );
    let holder = get(
        kubectl,
        &["get", "lease", "-n", "kube-system", "kube-scheduler"],
    );
    assert!(holder["spec"]["holderIdentity"].is_string(), "{holder}");
    kubectl.ok(&[
        "create",
        "deployment",
        "shop",
        "--image=nginx",
        "--replicas=3",
    ]);
    wait_for(WAIT, "3 Running pods of deployment shop", || {
        let pods = get(kubectl, &["get", "pods", "-l", "app=shop"]);
        let running = pods["items"]
            .as_array()?
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .filter(|p| p["spec"]["nodeName"] == "capstan-simulated-0")
            .count();
        (running == 3).then_some(())
    });
}

/// Three simulated nodes in capstan across three zones, 4 CPUs each.
const THREE_ZONES: [&str; 6] = [
    "--simulated-nodes",
    "3",
    "--simulated-node-zones",
    "zone-a,zone-b,zone-c",
    "--simulated-node-cpu",
    "4",
];

#[test]
fn placement_on_capstan_store() {
    let capstan = Embedded::start_with(&THREE_ZONES);
    let kubectl = &capstan.kubectl;
    wait_ready_nodes(kubectl, 3);
    placement(kubectl, capstan.dir.path());
}

#[test]
fn placement_on_etcd() {
    let cluster = ApiCluster::start_on(Backend::Etcd);
    let kubectl = &cluster.kubectl;
    let args = [
        "--nodes",
        "3",
        "--zones",
        "zone-a,zone-b,zone-c",
        "--cpu",
        "4",
    ];
    let _nodes = SimNodes::start(cluster.dir.path(), kubectl, &args);
    wait_ready_nodes(kubectl, 3);
    placement(kubectl, cluster.dir.path());
}

/// Every placement rule on a cluster of three 4-CPU nodes in three zones.
fn placement(kubectl: &Kubectl, dir: &std::path::Path) {
    too_big_stays_pending_while_others_schedule(kubectl);
    another_schedulers_pod_is_left_alone(kubectl);
    spread_across_three_zones(kubectl);
    node_affinity(kubectl);
    inter_pod_affinity(kubectl);
    // Last: a tainted fourth node.
    let gpu = [
        "--nodes",
        "1",
        "--name-prefix",
        "gpu-",
        "--zones",
        "zone-a",
        "--labels",
        "hardware=gpu",
        "--taints",
        "dedicated=gpu:NoSchedule",
    ];
    let _gpu = SimNodes::start(dir, kubectl, &gpu);
    wait_ready_nodes(kubectl, 4);
    taints_and_tolerations(kubectl);
}

fn too_big_stays_pending_while_others_schedule(kubectl: &Kubectl) {
    let huge = json!({"containers": [{"name": "app", "image": "nginx",
        "resources": {"requests": {"cpu": "100"}}}]});
    apply(kubectl, &pod("huge", json!({}), huge));
    let message = wait_failed_scheduling(kubectl, "huge");
    assert_eq!(
        message,
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: \
         3 No preemption victims found for incoming pod."
    );
    apply(kubectl, &pod("small", json!({}), json!({})));
    wait_bound(kubectl, "small");
    let huge = get(kubectl, &["get", "pod", "huge"]);
    assert!(huge["spec"]["nodeName"].is_null(), "{huge}");
    let condition = huge["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(condition["status"], "False", "{huge}");
    assert_eq!(condition["reason"], "Unschedulable", "{huge}");
    kubectl.ok(&["delete", "pod", "huge", "small", "--wait=false"]);
}

fn another_schedulers_pod_is_left_alone(kubectl: &Kubectl) {
    let elsewhere = json!({"schedulerName": "my-scheduler"});
    apply(kubectl, &pod("elsewhere", json!({}), elsewhere));
    // A pod created after it is scheduled: the scheduler has seen both.
    apply(kubectl, &pod("after", json!({}), json!({})));
    wait_bound(kubectl, "after");
    std::thread::sleep(Duration::from_secs(2));
    let left = get(kubectl, &["get", "pod", "elsewhere"]);
    assert!(left["spec"]["nodeName"].is_null(), "{left}");
    assert!(left["status"]["conditions"].is_null(), "{left}");
    let selector = "involvedObject.name=elsewhere";
    let events = get(kubectl, &["get", "events", "--field-selector", selector]);
    assert_eq!(events["items"], json!([]), "{events}");
    kubectl.ok(&["delete", "pod", "elsewhere", "after", "--wait=false"]);
}

fn spread_across_three_zones(kubectl: &Kubectl) {
    let spread = json!({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }]});
    let mut zones = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..6 {
        let name = format!("spread-{i}");
        apply(
            kubectl,
            &pod(&name, json!({"app": "spread"}), spread.clone()),
        );
        let node = wait_bound(kubectl, &name);
        *zones.entry(zone_of(kubectl, &node)).or_default() += 1;
    }
    let counts: Vec<usize> = zones.values().copied().collect();
    assert_eq!(counts, [2, 2, 2], "{zones:?}");
    kubectl.ok(&["delete", "pod", "-l", "app=spread", "--wait=false"]);
}

fn node_affinity(kubectl: &Kubectl) {
    let required = json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-b"]}]}]}}}});
    apply(kubectl, &pod("required", json!({}), required));
    let preferred = json!({"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference":
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-c"]}]}}]}}});
    apply(kubectl, &pod("preferred", json!({}), preferred));
    let node = wait_bound(kubectl, "required");
    assert_eq!(zone_of(kubectl, &node), "zone-b");
    let node = wait_bound(kubectl, "preferred");
    assert_eq!(zone_of(kubectl, &node), "zone-c");
    let nowhere = json!({"nodeSelector": {ZONE: "zone-z"}});
    apply(kubectl, &pod("nowhere", json!({}), nowhere));
    let message = wait_failed_scheduling(kubectl, "nowhere");
    assert!(
        message.starts_with(
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
        ),
        "{message}"
    );
    kubectl.ok(&[
        "delete",
        "pod",
        "required",
        "preferred",
        "nowhere",
        "--wait=false",
    ]);
}

fn inter_pod_affinity(kubectl: &Kubectl) {
    let apart = |name: &str| {
        let spec = json!({"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "solo"}},
                "topologyKey": "kubernetes.io/hostname"}]}}});
        pod(name, json!({"app": "solo"}), spec)
    };
    let mut nodes = std::collections::BTreeSet::new();
    for i in 0..3 {
        let name = format!("solo-{i}");
        apply(kubectl, &apart(&name));
        nodes.insert(wait_bound(kubectl, &name));
    }
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    apply(kubectl, &apart("solo-3"));
    let message = wait_failed_scheduling(kubectl, "solo-3");
    assert!(
        message.contains("3 node(s) didn't match pod anti-affinity rules"),
        "{message}"
    );
    let together = json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"role": "anchor"}},
            "topologyKey": "kubernetes.io/hostname"}]}}});
    apply(
        kubectl,
        &pod("anchor", json!({"role": "anchor"}), json!({})),
    );
    let anchor = wait_bound(kubectl, "anchor");
    apply(kubectl, &pod("follower", json!({}), together));
    assert_eq!(wait_bound(kubectl, "follower"), anchor);
    kubectl.ok(&["delete", "pod", "-l", "app=solo", "--wait=false"]);
    kubectl.ok(&["delete", "pod", "anchor", "follower", "--wait=false"]);
}

fn taints_and_tolerations(kubectl: &Kubectl) {
    let on_gpu = json!({"nodeSelector": {"hardware": "gpu"}});
    apply(kubectl, &pod("intolerant", json!({}), on_gpu.clone()));
    let message = wait_failed_scheduling(kubectl, "intolerant");
    assert!(
        message.starts_with(
            "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, \
             3 node(s) didn't match Pod's node affinity/selector."
        ),
        "{message}"
    );
    let mut tolerant = on_gpu;
    tolerant["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    apply(kubectl, &pod("tolerant", json!({}), tolerant));
    assert_eq!(wait_running(kubectl, "tolerant"), "gpu-0");
    for i in 0..3 {
        let name = format!("plain-{i}");
        apply(kubectl, &pod(&name, json!({}), json!({})));
        assert_ne!(wait_bound(kubectl, &name), "gpu-0");
    }
}

#[test]
fn preemption_evicts_a_lower_priority_pod() {
    let capstan = Embedded::start_with(&["--simulated-node-cpu", "2"]);
    let kubectl = &capstan.kubectl;
    wait_ready_nodes(kubectl, 1);
    for (name, value) in [("low", 10), ("high", 1000)] {
        apply(
            kubectl,
            &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}),
        );
    }
    let sized = |class: &str| {
        json!({"priorityClassName": class, "containers": [{"name": "app", "image": "nginx",
            "resources": {"requests": {"cpu": "1500m"}}}]})
    };
    apply(kubectl, &pod("victim", json!({}), sized("low")));
    wait_running(kubectl, "victim");
    apply(kubectl, &pod("preemptor", json!({}), sized("high")));
    wait_for(WAIT, "the victim gone", || {
        (!kubectl.run(&["get", "pod", "victim"]).status.success()).then_some(())
    });
    assert_eq!(wait_running(kubectl, "preemptor"), "capstan-simulated-0");
    let selector = "involvedObject.name=victim,reason=Preempted";
    let events = get(kubectl, &["get", "events", "--field-selector", selector]);
    let message = events["items"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Preempted by pod"), "{events}");
}
