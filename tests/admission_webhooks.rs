//! The admission webhooks, driven with kubectl: webhook servers written
//! here (HTTPS with their own CA, `support/webhook.rs`) refuse pods by a
//! label and add a label with a JSONPatch (one reached by URL, one through
//! a Service's Endpoints); a webhook that is down, answers garbage or
//! sleeps past its timeoutSeconds is handled by its failurePolicy; the
//! namespaceSelector and objectSelector keep objects away from a webhook;
//! a refused object is never written.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::webhook::{self, Reply, Webhook};
use capstan_tests::webhook_config::{
    base64_json, create_config, hook, json_of, url_config, wait_refused,
};
use serde_json::{json, Value};

capstan_tests::on_both_backends!(a_webhook_refuses_by_label_and_another_adds_one);

mod capstan_only {
    use capstan_tests::apiserver::Backend;

    #[test]
    fn a_webhook_that_is_down_or_answers_garbage_fails_by_its_policy() {
        super::a_webhook_that_is_down_or_answers_garbage_fails_by_its_policy(Backend::Capstan)
    }

    #[test]
    fn timeout_seconds_ends_the_wait_for_a_slow_webhook() {
        super::timeout_seconds_ends_the_wait_for_a_slow_webhook(Backend::Capstan)
    }

    #[test]
    fn selectors_keep_objects_away_from_a_webhook() {
        super::selectors_keep_objects_away_from_a_webhook(Backend::Capstan)
    }

    #[test]
    fn an_if_needed_webhook_sees_what_a_later_one_changed() {
        super::an_if_needed_webhook_sees_what_a_later_one_changed(Backend::Capstan)
    }
}

const WAIT: Duration = Duration::from_secs(30);

fn pod_names(kubectl: &Kubectl, namespace: &str) -> Vec<String> {
    let list = json_of(kubectl, &["get", "pods", "-n", namespace]);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn a_webhook_refuses_by_label_and_another_adds_one(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let dir = cluster.dir.path();
    let deny_dir = dir.join("deny");
    std::fs::create_dir_all(&deny_dir).unwrap();
    let message = "pods labelled deny=yes are not allowed";
    let deny = Webhook::start(&deny_dir, &[], webhook::deny_label("deny", "yes", message));
    // The mutating webhook is reached as a Service: its certificate holds
    // the Service's name, its Endpoints say where it listens.
    let mutate_dir = dir.join("mutate");
    std::fs::create_dir_all(&mutate_dir).unwrap();
    let mutate = Webhook::start(
        &mutate_dir,
        &["labeller.hooks.svc"],
        webhook::add_label("mutated", "yes"),
    );
    kubectl.ok(&["create", "namespace", "hooks"]);
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "labeller", "namespace": "hooks"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": mutate.port}]}});
    kubectl.ok_with_input(&["create", "-f", "-"], &service.to_string());
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "labeller", "namespace": "hooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": mutate.port}]}]});
    kubectl.ok_with_input(&["create", "-f", "-"], &endpoints.to_string());
    let by_service = json!({"service": {"namespace": "hooks", "name": "labeller", "path": "/mutate"},
                            "caBundle": mutate.ca_bundle()});
    create_config(
        kubectl,
        "MutatingWebhookConfiguration",
        "labeller",
        vec![hook("labeller.capstan.test", by_service, &["pods"])],
    );
    create_config(
        kubectl,
        "ValidatingWebhookConfiguration",
        "deny",
        vec![hook(
            "deny.capstan.test",
            url_config(&deny, "/deny"),
            &["pods"],
        )],
    );

    // Until the controller manager has made the namespace's `default`
    // ServiceAccount, its admission plugin refuses every pod before any
    // webhook sees it (slow on a loaded machine).
    kubectl.wait_for_default_account();
    let refused = wait_refused(
        kubectl,
        &["run", "probe", "--image=nginx", "--labels=deny=yes"],
        message,
    );
    assert!(
        refused.contains("Error from server (Forbidden)"),
        "{refused}"
    );
    let refused = kubectl.fails(&["run", "denied", "--image=nginx", "--labels=deny=yes"]);
    assert!(
        refused.contains(&format!(
            "admission webhook \"deny.capstan.test\" denied the request: {message}"
        )),
        "{refused}"
    );
    assert!(
        !pod_names(kubectl, "default").contains(&"denied".to_string()),
        "nothing written"
    );
    let missing = kubectl.fails(&["get", "pod", "denied"]);
    assert!(missing.contains("NotFound"), "{missing}");

    kubectl.ok(&["run", "allowed", "--image=nginx", "--labels=app=web"]);
    let pod = json_of(kubectl, &["get", "pod", "allowed"]);
    assert_eq!(
        pod["metadata"]["labels"],
        json!({"app": "web", "mutated": "yes"})
    );
    assert!(mutate.calls() >= 2 && deny.calls() >= 3, "both were called");

    let metrics = kubectl.ok(&["get", "--raw", "/metrics"]);
    let count = "apiserver_admission_webhook_admission_duration_seconds_count{name=\"deny.capstan.test\",type=\"validating\",operation=\"CREATE\",outcome=\"denied\"}";
    assert!(metrics.contains(count), "{metrics}");
    assert!(metrics.contains(
        "name=\"labeller.capstan.test\",type=\"admit\",operation=\"CREATE\",outcome=\"allowed\""
    ));
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A webhook for configmaps labelled `policy=<policy>`, failing by `failure`.
fn policy_hook(name: &str, client_config: Value, policy: &str, failure: &str) -> Value {
    let mut hook = hook(name, client_config, &["configmaps"]);
    hook["objectSelector"] = json!({"matchLabels": {"policy": policy}});
    hook["failurePolicy"] = failure.into();
    hook
}

fn create_labelled(
    kubectl: &Kubectl,
    name: &str,
    policy: &str,
    dry_run: bool,
) -> std::process::Output {
    let yaml = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"policy": policy}}})
    .to_string();
    let mut args = vec!["create", "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    kubectl.run_with_input(&args, &yaml)
}

fn a_webhook_that_is_down_or_answers_garbage_fails_by_its_policy(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let dir = cluster.dir.path();
    // A configuration kube would refuse, refused with kube's messages.
    let mut bad = hook(
        "bad.capstan.test",
        json!({"url": "http://127.0.0.1:1/"}),
        &["pods"],
    );
    bad.as_object_mut().unwrap().remove("sideEffects");
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"}, "webhooks": [bad]});
    let invalid = kubectl.run_with_input(&["create", "-f", "-"], &config.to_string());
    let invalid = String::from_utf8_lossy(&invalid.stderr).to_string();
    assert!(
        invalid.contains(
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"
        ),
        "{invalid}"
    );
    assert!(invalid.contains("webhooks[0].clientConfig.url: Invalid value: \"http://127.0.0.1:1/\": 'https' is the only allowed URL scheme"), "{invalid}");

    let down = json!({"url": format!("https://127.0.0.1:{}/", closed_port())});
    let garbage = Webhook::start(dir, &[], Arc::new(|_| Reply::Garbage));
    create_config(
        kubectl,
        "ValidatingWebhookConfiguration",
        "down",
        vec![
            policy_hook("fail.capstan.test", down.clone(), "fail", "Fail"),
            policy_hook("ignore.capstan.test", down, "ignore", "Ignore"),
            policy_hook(
                "garbage.capstan.test",
                url_config(&garbage, "/"),
                "garbage",
                "Fail",
            ),
        ],
    );
    let expected = "Internal error occurred: failed calling webhook \"fail.capstan.test\": failed to call webhook: Post \"https://127.0.0.1:";
    wait_for(WAIT, "the failing webhook to be called", || {
        let out = create_labelled(kubectl, "probe", "fail", true);
        String::from_utf8_lossy(&out.stderr)
            .contains(expected)
            .then_some(())
    });
    let refused = create_labelled(kubectl, "failed", "fail", false);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("Error from server (InternalError)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(expected) && stderr.contains("dial tcp"),
        "{stderr}"
    );

    let garbled = create_labelled(kubectl, "garbled", "garbage", false);
    let stderr = String::from_utf8_lossy(&garbled.stderr);
    assert!(
        stderr.contains(
            "failed calling webhook \"garbage.capstan.test\": received invalid webhook response: "
        ),
        "{stderr}"
    );
    assert_eq!(garbage.calls(), 1);

    let ignored = create_labelled(kubectl, "ignored", "ignore", false);
    assert!(
        ignored.status.success(),
        "{}",
        String::from_utf8_lossy(&ignored.stderr)
    );
    kubectl.ok(&["create", "configmap", "unlabelled"]);
    let names: Vec<String> = json_of(kubectl, &["get", "configmaps"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.contains(&"ignored".into()) && names.contains(&"unlabelled".into()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"failed".into()) && !names.contains(&"garbled".into()),
        "{names:?}"
    );
}

fn timeout_seconds_ends_the_wait_for_a_slow_webhook(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    // Sleeps far past the 1 s the configuration allows (the request
    // answers once the timeout ends the call, not after the sleep).
    let slow = Webhook::start(
        cluster.dir.path(),
        &[],
        Arc::new(|_| Reply::Sleep(Duration::from_secs(600))),
    );
    let mut fail = policy_hook(
        "slow-fail.capstan.test",
        url_config(&slow, "/"),
        "fail",
        "Fail",
    );
    fail["timeoutSeconds"] = 1.into();
    let mut ignore = policy_hook(
        "slow-ignore.capstan.test",
        url_config(&slow, "/"),
        "ignore",
        "Ignore",
    );
    ignore["timeoutSeconds"] = 1.into();
    create_config(
        kubectl,
        "ValidatingWebhookConfiguration",
        "slow",
        vec![fail, ignore],
    );
    let expected = format!(
        "failed calling webhook \"slow-fail.capstan.test\": failed to call webhook: Post \"https://127.0.0.1:{}/?timeout=1s\": context deadline exceeded",
        slow.port
    );
    wait_for(WAIT, "the slow webhook to be called", || {
        let out = create_labelled(kubectl, "probe", "fail", true);
        String::from_utf8_lossy(&out.stderr)
            .contains(&expected)
            .then_some(())
    });
    let refused = create_labelled(kubectl, "late", "fail", false);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains(&expected));
    let ignored = create_labelled(kubectl, "waited", "ignore", false);
    assert!(
        ignored.status.success(),
        "{}",
        String::from_utf8_lossy(&ignored.stderr)
    );
    assert!(kubectl
        .fails(&["get", "configmap", "late"])
        .contains("NotFound"));
    kubectl.ok(&["get", "configmap", "waited"]);
}

fn selectors_keep_objects_away_from_a_webhook(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let refuse_all = Arc::new(|_: &Value| {
        Reply::Review(json!({"allowed": false, "status": {"message": "no pods here"}}))
    });
    let strict = Webhook::start(cluster.dir.path(), &[], refuse_all);
    kubectl.ok(&["create", "namespace", "guarded"]);
    kubectl.ok(&["label", "namespace", "guarded", "webhooks=on"]);
    kubectl.ok(&["create", "namespace", "open"]);
    let mut refuse = hook("strict.capstan.test", url_config(&strict, "/"), &["pods"]);
    refuse["namespaceSelector"] = json!({"matchLabels": {"webhooks": "on"}});
    refuse["objectSelector"] =
        json!({"matchExpressions": [{"key": "exempt", "operator": "DoesNotExist"}]});
    create_config(
        kubectl,
        "ValidatingWebhookConfiguration",
        "strict",
        vec![refuse],
    );
    let message = "admission webhook \"strict.capstan.test\" denied the request: no pods here";
    let refused = wait_refused(
        kubectl,
        &["run", "probe", "--image=nginx", "-n", "guarded"],
        message,
    );
    // No code in the webhook's status: kube's 400, and no reason.
    assert!(
        refused.contains(&format!("Error from server (BadRequest): {message}"))
            || refused.contains(&format!("Error from server: {message}")),
        "{refused}"
    );
    let calls = strict.calls();
    kubectl.ok(&["run", "elsewhere", "--image=nginx", "-n", "open"]);
    kubectl.ok(&[
        "run",
        "exempted",
        "--image=nginx",
        "-n",
        "guarded",
        "--labels=exempt=yes",
    ]);
    assert_eq!(strict.calls(), calls, "neither reached the webhook");
    kubectl.fails(&["run", "caught", "--image=nginx", "-n", "guarded"]);
    assert_eq!(strict.calls(), calls + 1);
    assert_eq!(pod_names(kubectl, "guarded"), ["exempted"]);
    assert_eq!(pod_names(kubectl, "open"), ["elsewhere"]);
}

/// Sets `first` to whether the object already has the label `second`.
fn reports_second() -> webhook::Handler {
    Arc::new(|review: &Value| {
        let labels = &review["request"]["object"]["metadata"]["labels"];
        let value = if labels["second"].is_string() {
            "saw-second"
        } else {
            "no-second"
        };
        let patch = match labels.is_object() {
            true => json!([{"op": "add", "path": "/metadata/labels/first", "value": value}]),
            false => json!([{"op": "add", "path": "/metadata/labels", "value": {"first": value}}]),
        };
        let patch = base64_json(&patch);
        Reply::Review(json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}))
    })
}

fn an_if_needed_webhook_sees_what_a_later_one_changed(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let dir = cluster.dir.path();
    let (first_dir, second_dir) = (dir.join("first"), dir.join("second"));
    std::fs::create_dir_all(&first_dir).unwrap();
    std::fs::create_dir_all(&second_dir).unwrap();
    let first = Webhook::start(&first_dir, &[], reports_second());
    let second = Webhook::start(&second_dir, &[], webhook::add_label("second", "yes"));
    let mut reinvoked = hook(
        "first.capstan.test",
        url_config(&first, "/"),
        &["configmaps"],
    );
    reinvoked["reinvocationPolicy"] = "IfNeeded".into();
    // Configurations run in name order: a-first before b-second.
    create_config(
        kubectl,
        "MutatingWebhookConfiguration",
        "a-first",
        vec![reinvoked],
    );
    create_config(
        kubectl,
        "MutatingWebhookConfiguration",
        "b-second",
        vec![hook(
            "second.capstan.test",
            url_config(&second, "/"),
            &["configmaps"],
        )],
    );
    let labels = wait_for(WAIT, "both mutating webhooks to be called", || {
        kubectl.ok(&["delete", "configmap", "probe", "--ignore-not-found"]);
        kubectl.ok(&["create", "configmap", "probe"]);
        let labels = json_of(kubectl, &["get", "configmap", "probe"])["metadata"]["labels"].clone();
        (labels["second"] == "yes" && labels["first"].is_string()).then_some(labels)
    });
    assert_eq!(labels, json!({"first": "saw-second", "second": "yes"}));
    let calls = first.calls();
    // Without IfNeeded, the first webhook is called once and never sees it.
    kubectl.ok(&["delete", "mutatingwebhookconfiguration", "a-first"]);
    let mut once = hook(
        "first.capstan.test",
        url_config(&first, "/"),
        &["configmaps"],
    );
    once["reinvocationPolicy"] = "Never".into();
    create_config(
        kubectl,
        "MutatingWebhookConfiguration",
        "a-first",
        vec![once],
    );
    let never = wait_for(WAIT, "the Never configuration to be in use", || {
        kubectl.ok(&["delete", "configmap", "again", "--ignore-not-found"]);
        kubectl.ok(&["create", "configmap", "again"]);
        let labels = json_of(kubectl, &["get", "configmap", "again"])["metadata"]["labels"].clone();
        (labels["first"] == "no-second").then_some(labels)
    });
    assert_eq!(never, json!({"first": "no-second", "second": "yes"}));
    assert!(first.calls() > calls);
}
