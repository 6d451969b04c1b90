//! The Node authorizer and NodeRestriction on the running `capstan`
//! (`--authorization-mode=Node,RBAC`, its default), with two simulated
//! nodes in it and requests made as one of them (`system:node:<name>` in
//! `system:nodes`, by impersonation as the simulated nodes act):
//!
//! - the simulated nodes register, hold their Leases and run a pod each
//!   without any RBAC binding for nodes (`system:node` is bound to nobody);
//! - node A reads the Secret its own pod uses but not the one only node
//!   B's pod uses, nor any list of Secrets, nor B's pod, nor pods not
//!   selected by `spec.nodeName`;
//! - node A cannot write B's Node status or Lease, cannot set a
//!   `node-restriction.kubernetes.io/` label or change its taints, and
//!   cannot create a pod that is not its own mirror pod.

use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::http::Response;
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;
use capstan_tests::tokens::{admin, send_as};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "team";
const NODE_A: &str = "capstan-simulated-0";
const NODE_B: &str = "capstan-simulated-1";

/// A request as node `node` (the admin impersonating it, as the
/// simulated nodes do).
fn as_node(
    server: &Embedded,
    node: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Response {
    let user = format!("system:node:{node}");
    let content_type = match method {
        "PATCH" => "application/merge-patch+json",
        _ => "application/json",
    };
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", content_type),
        ("Impersonate-User", user.as_str()),
        ("Impersonate-Group", "system:nodes"),
    ];
    let body = body.map(Value::to_string).unwrap_or_default();
    send_as(
        server.port,
        &Identity::Admin,
        method,
        path,
        &headers,
        body.as_bytes(),
    )
}

fn refused(response: &Response, what: &str, message: &str) {
    assert_eq!(response.status, 403, "{what}: {}", response.text());
    let status = response.json().unwrap_or_else(|e| panic!("{what}: {e}"));
    let said = status["message"].as_str().unwrap_or_default();
    assert!(said.contains(message), "{what}: {said}");
}

/// A Secret and a pod on `node` that mounts it.
fn pod_with_secret(server: &Embedded, name: &str, node: &str) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
        "stringData": {"password": name}});
    admin(
        server.port,
        "POST",
        &format!("/api/v1/namespaces/{NS}/secrets"),
        &secret,
        201,
    );
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}],
            "volumes": [{"name": "s", "secret": {"secretName": name}}]}});
    let path = format!("/api/v1/namespaces/{NS}/pods");
    wait_for(WAIT, &format!("pod {name} to be created"), || {
        let (status, _) = capstan_tests::http::Connection::connect(server.port)
            .and_then(|mut c| c.json("POST", &path, Some(&pod)))
            .ok()?;
        (status == 201).then_some(())
    });
}

fn phase(server: &Embedded, pod: &str) -> Value {
    let path = format!("/api/v1/namespaces/{NS}/pods/{pod}");
    admin(server.port, "GET", &path, &Value::Null, 200)["status"]["phase"].clone()
}

fn start() -> Embedded {
    let server = Embedded::start_with(&["--simulated-nodes", "2"]);
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    admin(server.port, "POST", "/api/v1/namespaces", &namespace, 201);
    for node in [NODE_A, NODE_B] {
        wait_for(WAIT, &format!("node {node} to register"), || {
            let (status, _) = capstan_tests::http::Connection::connect(server.port)
                .and_then(|mut c| c.json("GET", &format!("/api/v1/nodes/{node}"), None))
                .ok()?;
            (status == 200).then_some(())
        });
    }
    pod_with_secret(&server, "a", NODE_A);
    pod_with_secret(&server, "b", NODE_B);
    server
}

#[test]
fn a_node_reads_only_what_its_own_pods_use() {
    let server = start();
    for pod in ["a", "b"] {
        wait_for(
            WAIT,
            &format!("pod {pod} to run on its simulated node"),
            || (phase(&server, pod) == "Running").then_some(()),
        );
    }
    let bindings = admin(
        server.port,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:node",
        &Value::Null,
        200,
    );
    assert!(
        bindings["subjects"].as_array().is_none_or(Vec::is_empty),
        "system:node is bound to nobody: {bindings}"
    );

    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    let own = wait_for(WAIT, "node A to read its pod's Secret", || {
        let answer = as_node(&server, NODE_A, "GET", &format!("{secrets}/a"), None);
        (answer.status == 200).then_some(answer)
    });
    assert_eq!(own.json().unwrap()["metadata"]["name"], "a");
    let other = as_node(&server, NODE_A, "GET", &format!("{secrets}/b"), None);
    refused(
        &other,
        "another node's Secret",
        "no relationship found between node",
    );
    let listed = as_node(&server, NODE_A, "GET", &secrets, None);
    refused(&listed, "a list of Secrets", "forbidden");
    let watched = format!("{secrets}?watch=1&fieldSelector=metadata.name%3Db&timeoutSeconds=1");
    refused(
        &as_node(&server, NODE_A, "GET", &watched, None),
        "a watch of B's Secret",
        "forbidden",
    );

    let pods = format!("/api/v1/namespaces/{NS}/pods");
    assert_eq!(
        as_node(&server, NODE_A, "GET", &format!("{pods}/a"), None).status,
        200
    );
    refused(
        &as_node(&server, NODE_A, "GET", &format!("{pods}/b"), None),
        "B's pod",
        "forbidden",
    );
    let selected = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE_A}");
    let mine = as_node(&server, NODE_A, "GET", &selected, None);
    assert_eq!(mine.status, 200, "{}", mine.text());
    let names: Vec<Value> = mine.json().unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("a")]);
    refused(
        &as_node(&server, NODE_A, "GET", "/api/v1/pods", None),
        "all pods",
        "forbidden",
    );
}

#[test]
fn a_node_writes_only_its_own_objects() {
    let server = start();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
        "reason": "Forged", "message": "written by another node"}]}});
    let theirs = as_node(
        &server,
        NODE_A,
        "PATCH",
        &format!("/api/v1/nodes/{NODE_B}/status"),
        Some(&status),
    );
    refused(
        &theirs,
        "B's Node status",
        &format!("node \"{NODE_A}\" is not allowed to modify node \"{NODE_B}\""),
    );
    let relabel = json!({"metadata": {"labels": {"team": "a"}}});
    let own = as_node(
        &server,
        NODE_A,
        "PATCH",
        &format!("/api/v1/nodes/{NODE_A}"),
        Some(&relabel),
    );
    assert_eq!(own.status, 200, "its own label: {}", own.text());
    let restricted =
        json!({"metadata": {"labels": {"node-restriction.kubernetes.io/pool": "secure"}}});
    let labelled = as_node(
        &server,
        NODE_A,
        "PATCH",
        &format!("/api/v1/nodes/{NODE_A}"),
        Some(&restricted),
    );
    refused(
        &labelled,
        "a node-restriction label",
        "node-restriction.kubernetes.io/pool",
    );
    let node = admin(
        server.port,
        "GET",
        &format!("/api/v1/nodes/{NODE_A}"),
        &Value::Null,
        200,
    );
    assert!(
        node["metadata"]["labels"]["node-restriction.kubernetes.io/pool"].is_null(),
        "{node}"
    );
    let tainted = json!({"spec": {"taints": [{"key": "mine", "effect": "NoSchedule"}]}});
    let taints = as_node(
        &server,
        NODE_A,
        "PATCH",
        &format!("/api/v1/nodes/{NODE_A}"),
        Some(&tainted),
    );
    refused(&taints, "its own taints", "is not allowed to modify taints");

    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let renewal = json!({"spec": {"holderIdentity": NODE_A}});
    let lease = as_node(
        &server,
        NODE_A,
        "PATCH",
        &format!("{leases}/{NODE_B}"),
        Some(&renewal),
    );
    refused(&lease, "B's Lease", "forbidden");
    wait_for(WAIT, "node A to read its own Lease", || {
        let mine = as_node(&server, NODE_A, "GET", &format!("{leases}/{NODE_A}"), None);
        assert_ne!(mine.status, 403, "its own Lease: {}", mine.text());
        (mine.status == 200).then_some(())
    });

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sneaky"},
        "spec": {"nodeName": NODE_A, "containers": [{"name": "c", "image": "nginx"}]}});
    let created = as_node(
        &server,
        NODE_A,
        "POST",
        &format!("/api/v1/namespaces/{NS}/pods"),
        Some(&pod),
    );
    refused(
        &created,
        "a pod that is no mirror pod",
        "can only create mirror pods",
    );
    let deleted = as_node(
        &server,
        NODE_A,
        "DELETE",
        &format!("/api/v1/namespaces/{NS}/pods/b"),
        None,
    );
    refused(
        &deleted,
        "B's pod deleted",
        "can only delete pods with spec.nodeName set to itself",
    );
    assert_ne!(phase(&server, "b"), Value::Null, "B's pod is still there");
}

/// A pod's uid, as the admin reads it.
fn uid(server: &Embedded, pod: &str) -> String {
    let path = format!("/api/v1/namespaces/{NS}/pods/{pod}");
    let found = admin(server.port, "GET", &path, &Value::Null, 200);
    found["metadata"]["uid"].as_str().unwrap().to_string()
}

#[test]
fn a_node_evicts_and_asks_tokens_only_for_its_own_pods() {
    let server = start();
    let tokens = format!("/api/v1/namespaces/{NS}/serviceaccounts/default/token");
    let ask = |reference: Value| {
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"boundObjectRef": reference}});
        as_node(&server, NODE_A, "POST", &tokens, Some(&request))
    };
    let pod = |name: &str, uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid});
    // The Node authorizer lets A ask tokens for `default` once its pod,
    // which runs as `default`, is in its graph.
    let own = wait_for(WAIT, "node A to get a token bound to its pod", || {
        let answer = ask(pod("a", &uid(&server, "a")));
        (answer.status == 201).then_some(answer)
    });
    assert!(own.json().unwrap()["status"]["token"].is_string());
    refused(
        &ask(Value::Null),
        "an unbound token",
        "node requested token not bound to a pod",
    );
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "name": "a"});
    refused(
        &ask(secret),
        "a token bound to a Secret",
        "not bound to a pod",
    );
    refused(
        &ask(pod("a", "")),
        "a pod binding without a uid",
        "without a uid",
    );
    refused(
        &ask(pod("b", &uid(&server, "b"))),
        "a token bound to B's pod",
        "bound to a pod scheduled on a different node",
    );

    let eviction = |name: &str| {
        let body =
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
        let path = format!("/api/v1/namespaces/{NS}/pods/{name}/eviction");
        as_node(&server, NODE_A, "POST", &path, Some(&body))
    };
    refused(
        &eviction("b"),
        "B's pod evicted",
        &format!("node {NODE_A} can only evict pods with spec.nodeName set to itself"),
    );
    let path = format!("/api/v1/namespaces/{NS}/pods/b");
    let b = admin(server.port, "GET", &path, &Value::Null, 200);
    assert!(b["metadata"]["deletionTimestamp"].is_null(), "{b}");
    let marked = b["status"]["conditions"].as_array().into_iter().flatten();
    assert!(
        !marked.into_iter().any(|c| c["type"] == "DisruptionTarget"),
        "B's pod is not marked for a refused eviction: {b}"
    );
    let evicted = eviction("a");
    assert_eq!(evicted.status, 201, "its own pod: {}", evicted.text());
}

/// A request with the identity `capstan` gives its simulated nodes
/// (`system:capstan-nodes` in `system:nodes`), impersonating `node` if
/// one is given, as the simulator's clients do.
fn as_simulator(server: &Embedded, node: Option<&str>, path: &str, body: &Value) -> Response {
    let pki = capstan_tests::tls::pki_of(server.port).expect("a TLS server");
    let since = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    let issued = pki
        .client_authority()
        .expect("the client CA")
        .issue_client(
            "system:capstan-nodes",
            Some("system:nodes"),
            since,
            time::Duration::days(1),
        )
        .expect("a client certificate");
    let identity = Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    };
    let user = node.map(|n| format!("system:node:{n}"));
    let mut headers = vec![
        ("Accept", "application/json"),
        ("Content-Type", "application/merge-patch+json"),
    ];
    if let Some(user) = user.as_deref() {
        headers.extend([
            ("Impersonate-User", user),
            ("Impersonate-Group", "system:nodes"),
        ]);
    }
    let body = body.to_string();
    send_as(
        server.port,
        &identity,
        "PATCH",
        path,
        &headers,
        body.as_bytes(),
    )
}

/// The simulator's own identity writes no node's status itself, may act
/// only as the nodes it runs, and acting as node A is held to A's objects.
#[test]
fn the_simulators_identity_acts_only_as_each_of_its_nodes() {
    let server = start();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
        "reason": "Forged", "message": "written by the simulator"}]}});
    let b_status = format!("/api/v1/nodes/{NODE_B}/status");
    refused(
        &as_simulator(&server, None, &b_status, &status),
        "B's status written as the simulator itself",
        "forbidden",
    );
    refused(
        &as_simulator(&server, Some(NODE_A), &b_status, &status),
        "B's status written as node A",
        &format!("node \"{NODE_A}\" is not allowed to modify node \"{NODE_B}\""),
    );
    refused(
        &as_simulator(
            &server,
            Some("worker-9"),
            "/api/v1/nodes/worker-9/status",
            &status,
        ),
        "a node it does not run impersonated",
        "cannot impersonate",
    );
    let relabel = json!({"metadata": {"labels": {"team": "a"}}});
    let own = as_simulator(
        &server,
        Some(NODE_A),
        &format!("/api/v1/nodes/{NODE_A}"),
        &relabel,
    );
    assert_eq!(own.status, 200, "node A's own Node: {}", own.text());
}
