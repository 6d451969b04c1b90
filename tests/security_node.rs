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
//!   cannot create a pod that is not its own mirror pod;
//! - the simulator's own identity writes no node's objects itself, acts
//!   only as the nodes it runs, and writes only its own Service,
//!   Endpoints and APIService.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::http::Response;
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;
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

/// A merge patch with the identity `capstan` gives its simulated nodes
/// (`system:capstan-nodes` in `system:nodes`), impersonating `node` if
/// one is given, as the simulator's clients do.
fn as_simulator(server: &Embedded, node: Option<&str>, path: &str, body: &Value) -> Response {
    let patch = "application/merge-patch+json";
    simulator_request(server, node, ("PATCH", path, patch), body)
}

/// `method` on `path` with a body of `content_type`, as the simulator
/// (see [`as_simulator`]).
fn simulator_request(
    server: &Embedded,
    node: Option<&str>,
    (method, path, content_type): (&str, &str, &str),
    body: &Value,
) -> Response {
    let identity = simulator_identity(server);
    let user = node.map(|n| format!("system:node:{n}"));
    let mut headers = vec![
        ("Accept", "application/json"),
        ("Content-Type", content_type),
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
        method,
        path,
        &headers,
        body.as_bytes(),
    )
}

/// A client certificate of `server`'s client CA for the simulator's own
/// user, as `capstan` and `capstan certificates` issue it.
fn simulator_identity(server: &Embedded) -> Identity {
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
    Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    }
}

/// `capstan-nodes --grant-impersonation-to system:capstan-nodes` for one
/// node named `<prefix>0`, with `kubectl`'s credentials; its output.
fn grant(kubectl: &Kubectl, prefix: &str) -> std::process::Output {
    std::process::Command::new(capstan_tests::binary("capstan-nodes"))
        .arg("--kubeconfig")
        .arg(&kubectl.kubeconfig)
        .args(["--nodes", "1", "--name-prefix", prefix])
        .args(["--grant-impersonation-to", "system:capstan-nodes"])
        .output()
        .expect("run capstan-nodes")
}

/// A separate `capstan-nodes` (as `make cluster` and compose.yaml run it)
/// works under its own identity, not the admin's, once an admin granted
/// it the impersonation of its nodes; it cannot grant that to itself.
#[test]
fn a_separate_simulator_runs_as_itself_after_an_admins_grant() {
    let server = start();
    let dir = server.dir.path();
    let own = Kubectl::as_identity(
        dir,
        server.port,
        &simulator_identity(&server),
        "nodes.kubeconfig",
    );
    let refused = grant(&own, "apart-");
    assert!(!refused.status.success(), "the simulator granted itself");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("forbidden"), "{said}");
    let granted = grant(&server.kubectl, "apart-");
    let said = String::from_utf8_lossy(&granted.stdout);
    assert!(
        granted.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    let nodes = SimNodes::start(dir, &own, &["--nodes", "1", "--name-prefix", "apart-"]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "apart"},
        "spec": {"nodeName": "apart-0", "containers": [{"name": "c", "image": "nginx"}]}});
    admin(
        server.port,
        "POST",
        &format!("/api/v1/namespaces/{NS}/pods"),
        &pod,
        201,
    );
    wait_for(
        WAIT,
        "the pod on the separate simulator's node to run",
        || {
            let path = format!("/api/v1/namespaces/{NS}/pods/apart");
            let (status, body) = capstan_tests::http::Connection::connect(server.port)
                .and_then(|mut c| c.json("GET", &path, None))
                .ok()?;
            (status == 200 && body["status"]["phase"] == "Running").then_some(())
        },
    );
    assert!(!nodes.log_text().contains("ERROR"), "{}", nodes.log_text());
}

/// What the simulator registers for metrics.k8s.io it may write (its
/// Service and Endpoints in kube-system, its APIService), by name and
/// nowhere else: no other Service, no Service of that name in another
/// namespace, no other APIService (which would let it take over an API
/// group through the aggregator).
#[test]
fn the_simulators_identity_writes_only_its_own_service_and_apiservice() {
    let server = start();
    let apply = "application/apply-patch+yaml";
    let service = |namespace: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": 443, "targetPort": 4443}]}})
    };
    let service_path = |namespace: &str, name: &str| {
        format!("/api/v1/namespaces/{namespace}/services/{name}?fieldManager=probe")
    };
    let registered = "/api/v1/namespaces/kube-system/services/capstan-nodes";
    wait_for(WAIT, "the simulator's Service", || {
        let (status, _) = capstan_tests::http::Connection::connect(server.port)
            .and_then(|mut c| c.json("GET", registered, None))
            .ok()?;
        (status == 200).then_some(())
    });
    let own = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "capstan-nodes", "namespace": "kube-system", "labels": {"probe": "yes"}}});
    let path = service_path("kube-system", "capstan-nodes");
    let applied = simulator_request(&server, None, ("PATCH", &path, apply), &own);
    assert!(
        [200, 201].contains(&applied.status),
        "its own Service: {}",
        applied.text()
    );
    for (namespace, name) in [("default", "capstan-nodes"), ("kube-system", "other")] {
        let path = service_path(namespace, name);
        let body = service(namespace, name);
        let answer = simulator_request(&server, None, ("PATCH", &path, apply), &body);
        refused(&answer, &format!("Service {namespace}/{name}"), "forbidden");
    }
    let kubernetes = json!({"metadata": {"labels": {"taken": "yes"}}});
    refused(
        &as_simulator(
            &server,
            None,
            "/api/v1/namespaces/default/services/kubernetes",
            &kubernetes,
        ),
        "the kubernetes Service",
        "forbidden",
    );
    let path = "/api/v1/namespaces/kube-system/services";
    let created = simulator_request(
        &server,
        None,
        ("POST", path, "application/json"),
        &service("kube-system", "x"),
    );
    refused(&created, "a new Service in kube-system", "forbidden");
    let api_service = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.example.com"},
        "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": 100, "insecureSkipTLSVerify": true,
            "service": {"namespace": "kube-system", "name": "capstan-nodes", "port": 443}}});
    let path = "/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com?fieldManager=probe";
    let answer = simulator_request(&server, None, ("PATCH", path, apply), &api_service);
    refused(&answer, "another APIService", "forbidden");
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
