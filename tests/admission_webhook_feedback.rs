//! What admission webhooks say besides yes or no, and when they are
//! asked: a webhook's warnings reach kubectl's stderr and its audit
//! annotations the audit event, a false matchCondition keeps a request
//! from it, and mutating webhooks are asked about deletes (where a patch
//! is kube's error).

use std::sync::Arc;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend};
use capstan_tests::audit_log;
use capstan_tests::poll::wait_for;
use capstan_tests::webhook::{self, Reply, Webhook};
use capstan_tests::webhook_config::{
    base64_json, create_config, hook, json_of, url_config, wait_refused,
};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_webhooks_warnings_and_annotations_are_passed_on_and_its_conditions_kept() {
    warnings_annotations_and_conditions(Backend::Capstan)
}

#[test]
fn mutating_webhooks_are_asked_about_deletes() {
    asked_about_deletes(Backend::Capstan)
}

/// Allows everything, with a warning and an audit annotation, and a
/// refusal (also warned about) for objects labelled deny=yes.
fn warns_and_annotates() -> webhook::Handler {
    Arc::new(|review: &Value| {
        let object = &review["request"]["object"];
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let mut response = json!({
            "allowed": object["metadata"]["labels"]["deny"] != "yes",
            "warnings": [format!("{name} is looked at by the note webhook")],
            "auditAnnotations": {"seen": name},
        });
        if response["allowed"] == false {
            response["status"] = json!({"code": 403, "message": "deny=yes is refused"});
        }
        Reply::Review(response)
    })
}

fn warnings_annotations_and_conditions(backend: Backend) {
    let cluster =
        ApiCluster::start_with(backend, |dir| audit_log::flags_recording(dir, "configmaps"));
    let kubectl = &cluster.kubectl;
    let hook_dir = cluster.dir.path().join("notes");
    std::fs::create_dir_all(&hook_dir).unwrap();
    let server = Webhook::start(&hook_dir, &[], warns_and_annotates());
    let mut note = hook(
        "note.capstan.test",
        url_config(&server, "/"),
        &["configmaps"],
    );
    note["matchConditions"] = json!([{"name": "not-skipped",
        "expression": "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}]);
    create_config(
        kubectl,
        "ValidatingWebhookConfiguration",
        "notes",
        vec![note],
    );
    let warned = wait_for(WAIT, "the webhook's warning on kubectl's stderr", || {
        let name = format!("noted-{}", server.calls());
        let out = kubectl.run(&["create", "configmap", &name]);
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        stderr.contains("is looked at").then_some((name, stderr))
    });
    let (name, stderr) = warned;
    assert_eq!(
        stderr.trim(),
        format!("Warning: {name} is looked at by the note webhook")
    );
    let event = audit_log::create_event(cluster.dir.path(), &name);
    assert_eq!(
        event["annotations"]["note.capstan.test/seen"],
        name.as_str(),
        "{event}"
    );
    // A matchCondition that is false keeps the request from the webhook.
    let calls = server.calls();
    let out = kubectl.run_with_input(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "skipped", "labels": {"skip": "yes"}}}"#,
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.calls(), calls, "the webhook was not called");
    // A refusal is still a refusal, and nothing is written.
    let out = kubectl.run_with_input(
        &["create", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", "labels": {"deny": "yes"}}}"#,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            r#"admission webhook "note.capstan.test" denied the request: deny=yes is refused"#
        ),
        "{stderr}"
    );
    // Its warning comes with the refusal, as kube sends it.
    assert!(
        stderr.contains("Warning: denied is looked at by the note webhook"),
        "{stderr}"
    );
    assert!(kubectl
        .fails(&["get", "configmap", "denied"])
        .contains("NotFound"));
}

/// On a delete: refuses objects labelled keep=yes (seen in oldObject),
/// and answers objects labelled patch=yes with a patch, which a delete
/// cannot take.
fn guards_deletes() -> webhook::Handler {
    Arc::new(|review: &Value| {
        let request = &review["request"];
        assert_eq!(request["operation"], "DELETE", "{review}");
        assert!(
            request["object"].is_null(),
            "a delete has no object: {review}"
        );
        let labels = &request["oldObject"]["metadata"]["labels"];
        if labels["keep"] == "yes" {
            let status = json!({"code": 403, "reason": "Forbidden", "message": "kept"});
            return Reply::Review(json!({"allowed": false, "status": status}));
        }
        if labels["patch"] == "yes" {
            let patch =
                base64_json(&json!([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]));
            return Reply::Review(
                json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
            );
        }
        Reply::Review(json!({"allowed": true}))
    })
}

fn asked_about_deletes(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let hook_dir = cluster.dir.path().join("guard");
    std::fs::create_dir_all(&hook_dir).unwrap();
    let server = Webhook::start(&hook_dir, &[], guards_deletes());
    let mut guard = hook(
        "guard.capstan.test",
        url_config(&server, "/"),
        &["configmaps"],
    );
    guard["rules"][0]["operations"] = json!(["DELETE"]);
    create_config(
        kubectl,
        "MutatingWebhookConfiguration",
        "guard",
        vec![guard],
    );
    for (name, label) in [
        ("kept", "keep=yes"),
        ("patched", "patch=yes"),
        ("plain", "other=yes"),
    ] {
        kubectl.ok(&["create", "configmap", name]);
        kubectl.ok(&["label", "configmap", name, label]);
    }
    wait_refused(
        kubectl,
        &["delete", "configmap", "kept"],
        "denied the request: kept",
    );
    let refused = kubectl.fails(&["delete", "configmap", "kept"]);
    assert!(
        refused.contains(r#"admission webhook "guard.capstan.test" denied the request: kept"#),
        "{refused}"
    );
    let patched = kubectl.fails(&["delete", "configmap", "patched"]);
    assert!(
        patched.contains(r#"admission webhook \"guard.capstan.test\" attempted to modify the object, which is not supported for this operation"#)
            || patched.contains(r#"admission webhook "guard.capstan.test" attempted to modify the object, which is not supported for this operation"#),
        "{patched}"
    );
    kubectl.ok(&["delete", "configmap", "plain"]);
    let left = json_of(kubectl, &["get", "configmaps", "-l", "keep=yes"]);
    assert_eq!(left["items"].as_array().map(Vec::len), Some(1), "{left}");
    kubectl.ok(&["get", "configmap", "patched"]);
    assert!(kubectl
        .fails(&["get", "configmap", "plain"])
        .contains("NotFound"));
}
