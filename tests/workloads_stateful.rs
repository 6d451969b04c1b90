//! StatefulSets and DaemonSets on `capstan --simulated-nodes 3`, driven
//! with kubectl as a person would: a StatefulSet of three comes up in
//! order (each pod created only once the one before is Ready) with a
//! claim per pod, rolls to a new image and back with `rollout undo`, and
//! scales down from the highest ordinal; a DaemonSet runs one pod on
//! every node, rolls a new image out node by node, and leaves alone a
//! node with a NoSchedule taint it does not tolerate.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::watchdog;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

fn start() -> (Embedded, watchdog::Watchdog) {
    let capstan = Embedded::start_with(&["--simulated-nodes", "3"]);
    let guard = watchdog::arm();
    capstan.kubectl.wait_ready_nodes(3, WAIT);
    (capstan, guard)
}

fn get(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl's JSON")
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

fn pods(kubectl: &Kubectl, selector: &str) -> Vec<Value> {
    let list = get(kubectl, &["get", "pods", "-l", selector]);
    list["items"].as_array().cloned().unwrap_or_default()
}

fn name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

fn image(pod: &Value) -> &str {
    pod["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

const STATEFUL_SET: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "nginx:1.25"}]
  volumeClaimTemplates:
  - metadata: {name: www}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"#;

/// Checks, while the set comes up, that no pod is created before the one
/// below it is Ready (a Ready transition at or before its creation).
fn comes_up_in_order(kubectl: &Kubectl) {
    wait_for(WAIT, "web-0..2 Running and Ready, in order", || {
        let pods = pods(kubectl, "app=web");
        let by_name = |n: &str| pods.iter().find(|p| name(p) == n);
        for (below, above) in [("web-0", "web-1"), ("web-1", "web-2")] {
            if let Some(above) = by_name(above) {
                let below = by_name(below).expect("the pod below exists");
                let ready_at = below["status"]["conditions"]
                    .as_array()
                    .and_then(|c| {
                        c.iter()
                            .find(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                    .and_then(|c| c["lastTransitionTime"].as_str())
                    .unwrap_or_else(|| {
                        panic!("{} created before {} was Ready", name(above), name(below))
                    });
                let created = above["metadata"]["creationTimestamp"].as_str().unwrap();
                assert!(
                    ready_at <= created,
                    "{} created at {created}, {} Ready at {ready_at}",
                    name(above),
                    name(below)
                );
            }
        }
        let ready = pods
            .iter()
            .filter(|p| condition(p, "Ready") == Some("True"))
            .count();
        (ready == 3).then_some(())
    });
}

fn images(kubectl: &Kubectl, selector: &str) -> Vec<String> {
    let mut images: Vec<String> = pods(kubectl, selector)
        .iter()
        .map(|p| image(p).to_string())
        .collect();
    images.sort();
    images
}

fn rolled_out(kubectl: &Kubectl, object: &str) -> String {
    kubectl.ok(&["rollout", "status", object, "--timeout=180s"])
}

#[test]
fn a_stateful_set_comes_up_in_order_rolls_back_and_scales_down_from_the_top() {
    let (capstan, _guard) = start();
    let kubectl = &capstan.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], STATEFUL_SET);
    comes_up_in_order(kubectl);
    let status = rolled_out(kubectl, "statefulset/web");
    assert!(status.contains("roll out complete"), "{status}");
    let claims = kubectl.ok(&["get", "pvc", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert_eq!(claims, "www-web-0 www-web-1 www-web-2");
    let events = kubectl.events_of("web");
    assert!(
        events.contains("SuccessfulCreate: create Pod web-0 in StatefulSet web successful"),
        "{events}"
    );

    kubectl.ok(&["set", "image", "statefulset/web", "nginx=nginx:1.26"]);
    rolled_out(kubectl, "statefulset/web");
    wait_for(WAIT, "every pod at nginx:1.26", || {
        (images(kubectl, "app=web") == ["nginx:1.26"; 3]).then_some(())
    });
    let history = kubectl.ok(&["rollout", "history", "statefulset/web"]);
    let numbered = "custom-columns=NAME:.metadata.name,REVISION:.revision";
    assert!(
        history.contains('1') && history.contains('2'),
        "{history}\n{}",
        kubectl.ok(&["get", "controllerrevisions", "-o", numbered])
    );
    let revisions = kubectl.ok(&["get", "controllerrevisions", "-o", "name"]);
    assert_eq!(revisions.lines().count(), 2, "{revisions}");

    kubectl.ok(&["rollout", "undo", "statefulset/web"]);
    rolled_out(kubectl, "statefulset/web");
    wait_for(WAIT, "every pod back at nginx:1.25", || {
        (images(kubectl, "app=web") == ["nginx:1.25"; 3]).then_some(())
    });
    let path =
        "jsonpath={.status.currentRevision} {.status.updateRevision} {.status.updatedReplicas}";
    let status = kubectl.ok(&["get", "statefulset", "web", "-o", path]);
    let fields: Vec<&str> = status.split(' ').collect();
    assert_eq!((fields[0] == fields[1], fields[2]), (true, "3"), "{status}");

    kubectl.ok(&["scale", "statefulset", "web", "--replicas=1"]);
    wait_for(WAIT, "only web-0 left", || {
        let pods = pods(kubectl, "app=web");
        let terminating = |n: &str| {
            pods.iter()
                .any(|p| name(p) == n && !p["metadata"]["deletionTimestamp"].is_null())
        };
        let present = |n: &str| pods.iter().any(|p| name(p) == n);
        assert!(
            !(present("web-2") && terminating("web-1")),
            "web-1 went while web-2 was still there"
        );
        (pods.len() == 1 && name(&pods[0]) == "web-0").then_some(())
    });
    let events = kubectl.events_of("web");
    assert!(
        events.contains("SuccessfulDelete: delete Pod web-2 in StatefulSet web successful"),
        "{events}"
    );
}

const DAEMON_SET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: "busybox:1.36"}]
"#;

fn node_of(pod: &Value) -> &str {
    pod["spec"]["nodeName"].as_str().unwrap_or_default()
}

#[test]
fn a_daemon_set_runs_on_every_untainted_node_and_rolls_out_a_new_image() {
    let (capstan, _guard) = start();
    let kubectl = &capstan.kubectl;
    let nodes = kubectl.ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
    let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
    nodes.sort();
    let tainted = nodes[2];
    kubectl.ok(&["taint", "nodes", tainted, "dedicated=special:NoSchedule"]);
    kubectl.ok_with_input(&["apply", "-f", "-"], DAEMON_SET);
    let status = rolled_out(kubectl, "daemonset/agent");
    assert!(status.contains("successfully rolled out"), "{status}");
    let on_nodes = |kubectl: &Kubectl| {
        let mut placed: Vec<String> = pods(kubectl, "app=agent")
            .iter()
            .map(|p| node_of(p).to_string())
            .collect();
        placed.sort();
        placed
    };
    // The taint and the DaemonSet are written back to back: a pod made
    // before the controller's node cache held the taint is deleted once it
    // does (it was never bound), so the placement is waited for.
    wait_for(WAIT, "one pod on each untainted node", || {
        (on_nodes(kubectl) == [nodes[0], nodes[1]]).then_some(())
    });
    let path = "jsonpath={.status.desiredNumberScheduled} {.status.numberReady} {.status.numberMisscheduled}";
    assert_eq!(
        kubectl.ok(&["get", "daemonset", "agent", "-o", path]),
        "2 2 0"
    );
    let events = kubectl.events_of("agent");
    assert!(
        events.contains("SuccessfulCreate: Created pod: agent-"),
        "{events}"
    );

    kubectl.ok(&["set", "image", "daemonset/agent", "agent=busybox:1.37"]);
    let status = rolled_out(kubectl, "daemonset/agent");
    assert!(status.contains("successfully rolled out"), "{status}");
    wait_for(WAIT, "both pods at busybox:1.37", || {
        (images(kubectl, "app=agent") == ["busybox:1.37"; 2]).then_some(())
    });
    assert_eq!(on_nodes(kubectl), [nodes[0], nodes[1]]);
    let revisions = kubectl.ok(&[
        "get",
        "controllerrevisions",
        "-l",
        "app=agent",
        "-o",
        "name",
    ]);
    assert_eq!(revisions.lines().count(), 2, "{revisions}");
    let events = kubectl.events_of("agent");
    assert!(
        events.contains("SuccessfulDelete: Deleted pod: agent-"),
        "{events}"
    );
}
