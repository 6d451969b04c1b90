//! Authorization holes a narrow token must not get through, tried on the
//! running `capstan` (RBAC by default) with ServiceAccount tokens from the
//! TokenRequest API, as a workload would hold them:
//!
//! - a Role allowing one Secret by `resourceNames` lets its holder watch
//!   and list that Secret (by name in the path, or by a `metadata.name`
//!   field selector) and receive nothing else; a watch or list that names
//!   no object is refused; a cluster-scoped kind (Namespaces) likewise;
//! - a Role allowing only `patch` on ConfigMaps cannot create one by
//!   server-side apply, while applying to an existing one still works.

use std::collections::BTreeSet;
use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::http::{Connection, Response};
use capstan_tests::tokens;
use serde_json::{json, Value};
const NS: &str = "team";

fn admin(server: &Embedded, method: &str, path: &str, body: &Value, want: u16) -> Value {
    tokens::admin(server.port, method, path, body, want)
}

fn as_token(
    server: &Embedded,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    tokens::as_token(server.port, token, method, path, headers, body)
}

fn get(server: &Embedded, token: &str, path: &str) -> Response {
    tokens::get(server.port, token, path)
}

fn service_account(server: &Embedded, name: &str, rules: Value) -> String {
    tokens::service_account(server.port, NS, name, rules)
}

fn wait_allowed(server: &Embedded, token: &str, path: &str) {
    tokens::wait_allowed(server.port, token, path)
}

/// The names in a watch's events (a 200 whose stream the server ends at
/// `timeoutSeconds`), with their event types.
fn watched(response: &Response) -> BTreeSet<(String, String)> {
    assert_eq!(response.status, 200, "watch: {}", response.text());
    response
        .text()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            assert_ne!(kind, "ERROR", "{event}");
            let name = event["object"]["metadata"]["name"].as_str();
            (kind, name.unwrap_or_default().to_string())
        })
        .collect()
}

fn names(events: &BTreeSet<(String, String)>) -> BTreeSet<&str> {
    events.iter().map(|(_, name)| name.as_str()).collect()
}

fn assert_refused(response: &Response, code: u16, what: &str) {
    assert_eq!(response.status, code, "{what}: {}", response.text());
}

fn start() -> Embedded {
    let server = Embedded::start();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    admin(&server, "POST", "/api/v1/namespaces", &namespace, 201);
    server
}

#[test]
fn a_watch_of_one_named_secret_streams_only_that_secret() {
    let server = start();
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    for name in ["app", "other"] {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "stringData": {"password": format!("{name}-secret")}});
        admin(&server, "POST", &secrets, &secret, 201);
    }
    let rules = json!([{"apiGroups": [""], "resources": ["secrets"],
        "resourceNames": ["app"], "verbs": ["get", "list", "watch"]}]);
    let token = service_account(&server, "reader", rules);
    wait_allowed(&server, &token, &format!("{secrets}/app"));

    // While the watches run, both Secrets change.
    let port = server.port;
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        for name in ["app", "other"] {
            let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
            let path = format!("/api/v1/namespaces/{NS}/secrets/{name}");
            let (status, body) = Connection::connect(port)
                .and_then(|mut c| c.json("PATCH", &path, Some(&patch)))
                .unwrap_or_else(|e| panic!("PATCH {path}: {e}"));
            assert_eq!(status, 200, "{body}");
        }
    });
    let named = get(
        &server,
        &token,
        &format!("{secrets}/app?watch=1&timeoutSeconds=3"),
    );
    writer.join().expect("the writer");
    let events = watched(&named);
    assert_eq!(names(&events), BTreeSet::from(["app"]), "{events:?}");
    assert!(
        events.contains(&("MODIFIED".into(), "app".into())),
        "the change to app is streamed: {events:?}"
    );

    let by_field = format!("{secrets}?watch=1&fieldSelector=metadata.name%3Dapp&timeoutSeconds=1");
    let events = watched(&get(&server, &token, &by_field));
    assert_eq!(names(&events), BTreeSet::from(["app"]), "{events:?}");
    let both = format!("{secrets}/app?watch=1&fieldSelector=metadata.name%3Dapp&timeoutSeconds=1");
    let events = watched(&get(&server, &token, &both));
    assert_eq!(names(&events), BTreeSet::from(["app"]), "{events:?}");

    let listed = get(
        &server,
        &token,
        &format!("{secrets}?fieldSelector=metadata.name%3Dapp"),
    );
    assert_eq!(listed.status, 200, "{}", listed.text());
    let list = listed.json().expect("a JSON list");
    let items: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .collect();
    assert_eq!(items, ["app"], "{list}");

    for path in [
        format!("{secrets}?watch=1&timeoutSeconds=1"),
        secrets.clone(),
        format!("{secrets}?fieldSelector=metadata.name%3Dother"),
        format!("{secrets}/other?watch=1&timeoutSeconds=1"),
        format!("{secrets}?watch=1&fieldSelector=metadata.name!%3Dother&timeoutSeconds=1"),
    ] {
        assert_refused(&get(&server, &token, &path), 403, &path);
    }
    let contradicting =
        format!("{secrets}/app?watch=1&fieldSelector=metadata.name%3Dother&timeoutSeconds=1");
    assert_refused(&get(&server, &token, &contradicting), 400, &contradicting);
}

#[test]
fn a_watch_of_one_named_namespace_streams_only_that_namespace() {
    let server = start();
    let token = service_account(&server, "nobody", json!([]));
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "see-team"},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"],
            "resourceNames": [NS], "verbs": ["get", "list", "watch"]}]});
    admin(&server, "POST", &format!("{rbac}/clusterroles"), &role, 201);
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "see-team"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "see-team"},
        "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": NS}]});
    admin(
        &server,
        "POST",
        &format!("{rbac}/clusterrolebindings"),
        &binding,
        201,
    );
    wait_allowed(&server, &token, &format!("/api/v1/namespaces/{NS}"));

    let named = format!("/api/v1/namespaces/{NS}?watch=1&timeoutSeconds=1");
    let events = watched(&get(&server, &token, &named));
    assert_eq!(names(&events), BTreeSet::from([NS]), "{events:?}");
    let by_field =
        format!("/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3D{NS}&timeoutSeconds=1");
    let events = watched(&get(&server, &token, &by_field));
    assert_eq!(names(&events), BTreeSet::from([NS]), "{events:?}");
    for path in [
        "/api/v1/namespaces?watch=1&timeoutSeconds=1",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default?watch=1&timeoutSeconds=1",
    ] {
        assert_refused(&get(&server, &token, path), 403, path);
    }
}

#[test]
fn server_side_apply_with_only_patch_rights_creates_nothing() {
    let server = start();
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"],
        "verbs": ["get", "patch"]}]);
    let token = service_account(&server, "patcher", rules);
    let configmaps = format!("/api/v1/namespaces/{NS}/configmaps");
    let existing = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "existing"}, "data": {"a": "1"}});
    admin(&server, "POST", &configmaps, &existing, 201);
    wait_allowed(&server, &token, &format!("{configmaps}/existing"));

    let apply = |name: &str| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"b": "2"}});
        let path = format!("{configmaps}/{name}?fieldManager=intruder");
        let headers = [
            ("Accept", "application/json"),
            ("Content-Type", "application/apply-patch+yaml"),
        ];
        as_token(
            &server,
            &token,
            "PATCH",
            &path,
            &headers,
            body.to_string().as_bytes(),
        )
    };
    let refused = apply("made");
    assert_refused(&refused, 403, "an apply that would create");
    let message = refused.json().expect("a Status")["message"].to_string();
    assert!(message.contains("cannot create"), "{message}");
    let (status, body) = Connection::connect(server.port)
        .and_then(|mut c| c.json("GET", &format!("{configmaps}/made"), None))
        .unwrap_or_else(|e| panic!("GET: {e}"));
    assert_eq!(status, 404, "nothing was created: {body}");

    let applied = apply("existing");
    assert_eq!(applied.status, 200, "{}", applied.text());
    let object = applied.json().expect("the ConfigMap");
    assert_eq!(object["data"], json!({"a": "1", "b": "2"}), "{object}");
}
