//! The deployment walk-through a new user takes, driven with kubectl as a
//! person would against `capstan` with two simulated nodes: create,
//! `rollout status`, `set image`, a history of two, `rollout undo` back
//! to the first image, scale up and down, pause (nothing rolls, undo
//! refused) and resume, restart, delete with everything it owned gone;
//! and `kubectl expose`, whose Endpoints and EndpointSlices follow the
//! pods' readiness. The store does not matter to these controllers, so
//! the walk-through runs on capstan's own store only.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

fn start() -> Embedded {
    let capstan = Embedded::start_with(&["--simulated-nodes", "2"]);
    capstan.kubectl.wait_ready_nodes(2, WAIT);
    capstan
}

fn json(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&all)).expect("kubectl prints JSON")
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}

/// `kubectl create deployment web` of three nginx:1.25 pods (and
/// `extra` flags), rolled out.
fn create_web(kubectl: &Kubectl, extra: &[&str]) {
    let create = [
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--replicas=3",
    ];
    kubectl.ok(&[&create[..], extra].concat());
    rollout_status(kubectl);
}

/// `kubectl rollout status` until it says the rollout is done.
fn rollout_status(kubectl: &Kubectl) {
    let out = kubectl.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
}

/// The images of the deployment's pods that are not terminating.
fn pod_images(kubectl: &Kubectl) -> Vec<String> {
    let pods = json(kubectl, &["get", "pods", "-l", "app=web"]);
    items(&pods)
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or("")
                .into()
        })
        .collect()
}

/// Waits until exactly `count` live pods run `image`, and no other.
fn wait_pods(kubectl: &Kubectl, count: usize, image: &str) {
    wait_for(WAIT, &format!("{count} pods of {image} alone"), || {
        let images = pod_images(kubectl);
        (images.len() == count && images.iter().all(|i| i == image)).then_some(())
    });
}

/// The deployment's ReplicaSets: (revision, image, replicas).
fn replica_sets(kubectl: &Kubectl) -> Vec<(String, String, i64)> {
    let list = json(kubectl, &["get", "rs", "-l", "app=web"]);
    let mut sets: Vec<_> = items(&list)
        .iter()
        .map(|rs| {
            let revision = &rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"];
            (
                revision.as_str().unwrap_or("").to_string(),
                rs["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                rs["spec"]["replicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    sets.sort_by_key(|s| s.0.parse::<i64>().unwrap_or(0));
    sets
}

fn deployment_image(kubectl: &Kubectl) -> String {
    kubectl.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
}

#[test]
fn a_deployment_rolls_out_back_scales_pauses_restarts_and_goes() {
    let capstan = start();
    let kubectl = &capstan.kubectl;
    create_web(kubectl, &[]);
    wait_pods(kubectl, 3, "nginx:1.25");
    let ready = kubectl.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.status.readyReplicas}/{.status.availableReplicas}/{.status.updatedReplicas}",
    ]);
    assert_eq!(ready, "3/3/3");

    kubectl.ok(&["set", "image", "deployment/web", "nginx=nginx:1.26"]);
    rollout_status(kubectl);
    wait_pods(kubectl, 3, "nginx:1.26");
    let history = kubectl.ok(&["rollout", "history", "deployment/web"]);
    let revisions: Vec<&str> = history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let second = kubectl.ok(&["rollout", "history", "deployment/web", "--revision=2"]);
    assert!(second.contains("nginx:1.26"), "{second}");

    kubectl.ok(&["rollout", "undo", "deployment/web"]);
    rollout_status(kubectl);
    assert_eq!(deployment_image(kubectl), "nginx:1.25");
    wait_pods(kubectl, 3, "nginx:1.25");
    // The first template came back as revision 3: still two ReplicaSets,
    // the new one holding every replica.
    let sets = replica_sets(kubectl);
    assert_eq!(
        sets,
        [
            ("2".to_string(), "nginx:1.26".to_string(), 0),
            ("3".to_string(), "nginx:1.25".to_string(), 3)
        ]
    );

    scale_up_and_down(kubectl);
    pause_and_resume(kubectl);
    restart(kubectl);
    delete_takes_everything(kubectl);
}

fn scale_up_and_down(kubectl: &Kubectl) {
    kubectl.ok(&["scale", "deployment/web", "--replicas=6"]);
    rollout_status(kubectl);
    wait_pods(kubectl, 6, "nginx:1.25");
    kubectl.ok(&["scale", "deployment/web", "--replicas=2"]);
    rollout_status(kubectl);
    wait_pods(kubectl, 2, "nginx:1.25");
    let sets = replica_sets(kubectl);
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert_eq!(sets[1].2, 2, "{sets:?}");
}

fn pause_and_resume(kubectl: &Kubectl) {
    kubectl.ok(&["rollout", "pause", "deployment/web"]);
    kubectl.ok(&["set", "image", "deployment/web", "nginx=nginx:1.27"]);
    // The controller sees the change (observedGeneration catches up) and
    // rolls nothing while paused.
    wait_for(WAIT, "the paused change observed", || {
        let d = json(kubectl, &["get", "deployment", "web"]);
        (d["status"]["observedGeneration"] == d["metadata"]["generation"]).then_some(())
    });
    assert!(
        replica_sets(kubectl).iter().all(|s| s.1 != "nginx:1.27"),
        "a paused deployment made a ReplicaSet"
    );
    let refused = kubectl.fails(&["rollout", "undo", "deployment/web"]);
    assert!(refused.contains("paused"), "{refused}");
    kubectl.ok(&["rollout", "resume", "deployment/web"]);
    rollout_status(kubectl);
    wait_pods(kubectl, 2, "nginx:1.27");
}

fn restart(kubectl: &Kubectl) {
    let before = replica_sets(kubectl).len();
    kubectl.ok(&["rollout", "restart", "deployment/web"]);
    rollout_status(kubectl);
    wait_for(WAIT, "two restarted pods alone", || {
        let pods = json(kubectl, &["get", "pods", "-l", "app=web"]);
        let live: Vec<Value> = items(&pods)
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let restarted = live
            .iter()
            .all(|p| p["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"].is_string());
        (live.len() == 2 && restarted).then_some(())
    });
    assert_eq!(replica_sets(kubectl).len(), before + 1);
}

fn delete_takes_everything(kubectl: &Kubectl) {
    kubectl.ok(&["delete", "deployment", "web"]);
    wait_for(WAIT, "the deployment's ReplicaSets and pods gone", || {
        let rs = items(&json(kubectl, &["get", "rs", "-l", "app=web"]));
        let pods = items(&json(kubectl, &["get", "pods", "-l", "app=web"]));
        (rs.is_empty() && pods.is_empty()).then_some(())
    });
}

/// The Endpoints' ready and not-ready addresses: (ready, not ready);
/// none until the endpoints controller has made the object.
fn endpoint_addresses(kubectl: &Kubectl) -> (usize, usize) {
    let read = kubectl.run(&[
        "get",
        "endpoints",
        "web",
        "-o",
        "json",
        "--ignore-not-found",
    ]);
    let text = String::from_utf8_lossy(&read.stdout);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    if text.trim().is_empty() {
        return (0, 0);
    }
    let endpoints: Value = serde_json::from_str(&text).expect("kubectl prints JSON");
    let subsets = endpoints["subsets"].as_array().cloned().unwrap_or_default();
    let count = |field: &str| {
        subsets
            .iter()
            .map(|s| s[field].as_array().map_or(0, Vec::len))
            .sum()
    };
    (count("addresses"), count("notReadyAddresses"))
}

/// The EndpointSlices of the Service `web`.
fn web_slices(kubectl: &Kubectl) -> Vec<Value> {
    let selector = "kubernetes.io/service-name=web";
    items(&json(kubectl, &["get", "endpointslices", "-l", selector]))
}

/// The EndpointSlices' endpoints: (ready, not ready).
fn slice_endpoints(kubectl: &Kubectl) -> (usize, usize) {
    let slices = web_slices(kubectl);
    let endpoints: Vec<Value> = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .collect();
    let ready = endpoints
        .iter()
        .filter(|e| e["conditions"]["ready"] == true)
        .count();
    (ready, endpoints.len() - ready)
}

#[test]
fn an_exposed_deployment_has_endpoints_that_follow_readiness() {
    let capstan = start();
    let kubectl = &capstan.kubectl;
    create_web(kubectl, &["--port=80"]);
    kubectl.ok(&[
        "expose",
        "deployment",
        "web",
        "--port=8080",
        "--target-port=80",
    ]);
    wait_for(WAIT, "three ready endpoints and slice endpoints", || {
        (endpoint_addresses(kubectl) == (3, 0) && slice_endpoints(kubectl) == (3, 0)).then_some(())
    });
    let slices = web_slices(kubectl);
    let slice = &slices[0];
    assert_eq!(slice["ports"][0]["port"], 80, "{slice}");
    assert_eq!(slice["addressType"], "IPv4", "{slice}");

    // A template whose readiness probe never passes: the rollout adds
    // pods that stay unready (at most maxSurge of them, and the old ones
    // stay), and both Endpoints and slices list them as not ready.
    let unready = r#"{"spec":{"template":{"metadata":{"annotations":{"nodes.capstan.dev/ready":"false"}},"spec":{"containers":[{"name":"nginx","readinessProbe":{"httpGet":{"path":"/","port":80},"periodSeconds":1}}]}}}}"#;
    kubectl.ok(&["patch", "deployment", "web", "-p", unready]);
    wait_for(WAIT, "an unready surge pod listed as not ready", || {
        let (ready, not_ready) = endpoint_addresses(kubectl);
        let slices = slice_endpoints(kubectl);
        (ready >= 2 && not_ready >= 1 && slices == (ready, not_ready)).then_some(())
    });
    let status = kubectl.run(&["rollout", "status", "deployment/web", "--timeout=3s"]);
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        !status.status.success(),
        "an unready rollout finished: {said}"
    );

    // Back to the ready template: every endpoint ready again.
    kubectl.ok(&["rollout", "undo", "deployment/web"]);
    rollout_status(kubectl);
    wait_for(WAIT, "three ready endpoints again", || {
        (endpoint_addresses(kubectl) == (3, 0) && slice_endpoints(kubectl) == (3, 0)).then_some(())
    });
    kubectl.ok(&["delete", "service", "web"]);
    wait_for(WAIT, "the Service's Endpoints and slices gone", || {
        let slices = json(
            kubectl,
            &[
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=web",
            ],
        );
        let endpoints = kubectl.run(&["get", "endpoints", "web"]);
        (items(&slices).is_empty() && !endpoints.status.success()).then_some(())
    });
}
