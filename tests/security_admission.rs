//! Admission sees every write, with who makes it, tried on the running
//! `capstan`:
//!
//! - a pod's binding is a CREATE of `pods/binding` to webhooks: a
//!   validating webhook refuses a binding to a node it names (the pod
//!   stays unbound) and sees the others with the binder's uid and extra;
//! - a ValidatingAdmissionPolicy reads `request.userInfo.uid`;
//! - every namespace carries `kubernetes.io/metadata.name` (its name),
//!   which a user can neither remove nor change, and a webhook's and a
//!   policy binding's `namespaceSelector` on it keep other namespaces away.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan_tests::apiserver::Embedded;
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;
use capstan_tests::tokens::{self, admin, service_account};
use capstan_tests::webhook::{Reply, Webhook};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "team";
const OTHER: &str = "other";
const NAME_LABEL: &str = "kubernetes.io/metadata.name";
const REFUSED_NODE: &str = "refused-node";

fn start() -> Embedded {
    let server = Embedded::start();
    for name in [NS, OTHER] {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        admin(server.port, "POST", "/api/v1/namespaces", &namespace, 201);
    }
    server
}

/// Creates pod `name` in `namespace` (once the namespace's default
/// ServiceAccount, which admission needs, exists).
fn create_pod(server: &Embedded, namespace: &str, name: &str) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let path = format!("/api/v1/namespaces/{namespace}/pods");
    wait_for(
        WAIT,
        &format!("pod {namespace}/{name} to be created"),
        || {
            let answer = tokens::write(server.port, &Identity::Admin, "POST", &path, &pod);
            (answer.status == 201).then_some(())
        },
    );
}

fn binding_path(namespace: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{pod}/binding")
}

fn binding(pod: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
        "target": {"kind": "Node", "name": node}})
}

fn node_of(server: &Embedded, namespace: &str, pod: &str) -> Value {
    let path = format!("/api/v1/namespaces/{namespace}/pods/{pod}");
    admin(server.port, "GET", &path, &Value::Null, 200)["spec"]["nodeName"].clone()
}

/// A webhook that keeps every review it is sent and refuses bindings to
/// [`REFUSED_NODE`].
fn recording_webhook(dir: &std::path::Path) -> (Webhook, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let handler = Arc::new(move |review: &Value| {
        kept.lock().unwrap().push(review["request"].clone());
        match review["request"]["object"]["target"]["name"] == REFUSED_NODE {
            true => Reply::Review(json!({"allowed": false,
                "status": {"code": 403, "reason": "Forbidden", "message": "no pods on refused-node"}})),
            false => Reply::Review(json!({"allowed": true})),
        }
    });
    (Webhook::start(dir, &[], handler), seen)
}

fn register_binding_webhook(server: &Embedded, webhook: &Webhook) {
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bindings"},
        "webhooks": [{"name": "bindings.capstan.test",
            "clientConfig": {"url": webhook.url("/bind"), "caBundle": webhook.ca_bundle()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods/binding"]}],
            "namespaceSelector": {"matchLabels": {NAME_LABEL: NS}},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}]});
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    admin(server.port, "POST", path, &config, 201);
}

#[test]
fn a_binding_is_admitted_as_a_create_of_pods_binding_with_the_binders_identity() {
    let server = start();
    let (webhook, seen) = recording_webhook(server.dir.path());
    register_binding_webhook(&server, &webhook);
    let rules = json!([{"apiGroups": [""], "resources": ["pods", "pods/binding"],
        "verbs": ["get", "create"]}]);
    let token = service_account(server.port, NS, "binder", rules);
    let binder = Identity::Token(token.clone());
    create_pod(&server, NS, "p1");
    create_pod(&server, OTHER, "p2");
    tokens::wait_allowed(
        server.port,
        &token,
        &format!("/api/v1/namespaces/{NS}/pods/p1"),
    );

    let path = binding_path(NS, "p1");
    let dry_run = format!("{path}?dryRun=All");
    let refused = wait_for(WAIT, "the webhook to refuse a binding", || {
        let answer = tokens::write(
            server.port,
            &binder,
            "POST",
            &dry_run,
            &binding("p1", REFUSED_NODE),
        );
        (answer.status == 403).then_some(answer)
    });
    assert!(
        refused.text().contains("no pods on refused-node"),
        "{}",
        refused.text()
    );
    let refused = tokens::write(
        server.port,
        &binder,
        "POST",
        &path,
        &binding("p1", REFUSED_NODE),
    );
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        node_of(&server, NS, "p1"),
        Value::Null,
        "a refused binding binds nothing"
    );

    let bound = tokens::write(
        server.port,
        &binder,
        "POST",
        &path,
        &binding("p1", "node-a"),
    );
    assert_eq!(bound.status, 201, "{}", bound.text());
    assert_eq!(node_of(&server, NS, "p1"), "node-a");

    let account = format!("/api/v1/namespaces/{NS}/serviceaccounts/binder");
    let uid = admin(server.port, "GET", &account, &Value::Null, 200)["metadata"]["uid"].clone();
    let reviews = seen.lock().unwrap().clone();
    let admitted = reviews
        .iter()
        .find(|r| r["object"]["target"]["name"] == "node-a")
        .unwrap_or_else(|| panic!("the webhook never saw the binding: {reviews:?}"));
    assert_eq!(admitted["operation"], "CREATE", "{admitted}");
    assert_eq!(admitted["resource"]["resource"], "pods", "{admitted}");
    assert_eq!(admitted["subResource"], "binding", "{admitted}");
    assert_eq!(admitted["kind"]["kind"], "Binding", "{admitted}");
    assert_eq!(
        (admitted["namespace"].as_str(), admitted["name"].as_str()),
        (Some(NS), Some("p1"))
    );
    let user = &admitted["userInfo"];
    assert_eq!(
        user["username"], "system:serviceaccount:team:binder",
        "{user}"
    );
    assert_eq!(
        user["uid"], uid,
        "the binder's uid reaches the webhook: {user}"
    );
    assert!(
        user["extra"]["authentication.kubernetes.io/credential-id"].is_array(),
        "the token's extra reaches the webhook: {user}"
    );

    // The namespaceSelector on the name label keeps the other namespace away.
    let elsewhere = binding_path(OTHER, "p2");
    admin(
        server.port,
        "POST",
        &elsewhere,
        &binding("p2", REFUSED_NODE),
        201,
    );
    assert_eq!(node_of(&server, OTHER, "p2"), REFUSED_NODE);
    let reviews = seen.lock().unwrap().clone();
    assert!(
        reviews.iter().all(|r| r["namespace"] == NS),
        "a review from outside {NS}: {reviews:?}"
    );
}

#[test]
fn every_namespace_keeps_its_name_label() {
    let server = start();
    let path = format!("/api/v1/namespaces/{NS}");
    let label = |server: &Embedded| {
        admin(server.port, "GET", &path, &Value::Null, 200)["metadata"]["labels"][NAME_LABEL]
            .clone()
    };
    assert_eq!(label(&server), NS);
    let default = admin(
        server.port,
        "GET",
        "/api/v1/namespaces/default",
        &Value::Null,
        200,
    );
    assert_eq!(
        default["metadata"]["labels"][NAME_LABEL], "default",
        "{default}"
    );
    for change in [json!(null), json!("default")] {
        let patch = json!({"metadata": {"labels": {NAME_LABEL: change, "team": "blue"}}});
        let patched = admin(server.port, "PATCH", &path, &patch, 200);
        assert_eq!(patched["metadata"]["labels"][NAME_LABEL], NS, "{patched}");
        assert_eq!(patched["metadata"]["labels"]["team"], "blue", "{patched}");
        assert_eq!(label(&server), NS);
    }
    let selected = admin(
        server.port,
        "GET",
        &format!("/api/v1/namespaces?labelSelector={NAME_LABEL}%3D{NS}"),
        &Value::Null,
        200,
    );
    let names: Vec<&str> = selected["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, [NS]);
}

#[test]
fn a_policy_reads_the_writers_uid() {
    let server = start();
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "own-uid"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.data.uid == request.userInfo.uid",
                "message": "data.uid must be the writer's uid"}]}});
    let vap = "/apis/admissionregistration.k8s.io/v1";
    admin(
        server.port,
        "POST",
        &format!("{vap}/validatingadmissionpolicies"),
        &policy,
        201,
    );
    let bound = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "own-uid"},
        "spec": {"policyName": "own-uid", "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {NAME_LABEL: NS}}}}});
    admin(
        server.port,
        "POST",
        &format!("{vap}/validatingadmissionpolicybindings"),
        &bound,
        201,
    );
    let rules =
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]}]);
    let token = service_account(server.port, NS, "writer", rules);
    let writer = Identity::Token(token);
    let account = format!("/api/v1/namespaces/{NS}/serviceaccounts/writer");
    let uid = admin(server.port, "GET", &account, &Value::Null, 200)["metadata"]["uid"].clone();
    let configmaps = format!("/api/v1/namespaces/{NS}/configmaps");
    let configmap = |name: &str, uid: &Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"uid": uid}})
    };
    let refused = wait_for(WAIT, "the policy to refuse another uid", || {
        let answer = tokens::write(
            server.port,
            &writer,
            "POST",
            &configmaps,
            &configmap("wrong", &json!("x")),
        );
        (answer.status != 201 && answer.text().contains("own-uid")).then_some(answer)
    });
    assert!(
        refused.text().contains("data.uid must be the writer's uid"),
        "{}",
        refused.text()
    );
    let created = tokens::write(
        server.port,
        &writer,
        "POST",
        &configmaps,
        &configmap("mine", &uid),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    // Outside the selected namespace the policy does not apply.
    let admin_path = format!("/api/v1/namespaces/{OTHER}/configmaps");
    admin(
        server.port,
        "POST",
        &admin_path,
        &configmap("any", &json!("x")),
        201,
    );
}
