//! A CRD served in two versions over one storage version: with
//! `conversion: None` (only apiVersion changes) and with a conversion
//! webhook written here (HTTPS, its own CA) that renames a field. Objects
//! written in either version are stored in the storage version (read
//! back raw with etcdctl), read, listed and watched in either, validated
//! against the schema of the version they were sent in (a version not
//! served is not routed or discovered), and stay
//! readable after the storage version moves; a webhook that cannot be
//! reached refuses the write with kube's error and nothing is stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiCluster, Backend, Http, WatchEvents};
use capstan_tests::etcdctl::etcdctl_ok;
use capstan_tests::poll::wait_for;
use capstan_tests::webhook::{Reply, Webhook};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

capstan_tests::on_both_backends!(
    two_versions_without_conversion,
    a_conversion_webhook_renames_a_field,
);

/// v1 allows sizes of at most 5 characters, v2 of any length and a note.
fn crd(storage_v1: bool) -> Value {
    let size = |max: Option<u64>| match max {
        Some(max) => json!({"type": "string", "maxLength": max}),
        None => json!({"type": "string"}),
    };
    let schema = |props: Value| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": props}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": storage_v1,
                 "schema": schema(json!({"size": size(Some(5))}))},
                {"name": "v2", "served": true, "storage": !storage_v1,
                 "schema": schema(json!({"size": size(None), "note": {"type": "string"}}))},
                {"name": "v1alpha1", "served": false, "storage": false,
                 "schema": schema(json!({"size": size(None)}))}]}})
}

fn widget(version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn path(version: &str) -> String {
    format!("/apis/example.com/{version}/namespaces/default/widgets")
}

/// The object as the store holds it, read with etcdctl.
fn stored(cluster: &ApiCluster, name: &str) -> Value {
    let key = format!("/registry/example.com/widgets/default/{name}");
    let text = etcdctl_ok(&cluster.store.url(), &["get", &key, "--print-value-only"]);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{key}: {e}: {text}"))
}

/// Creates (or replaces) the CRD and waits until `versions` answer.
fn apply_crd(http: &mut Http, crd: &Value, versions: &[&str]) {
    let name = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let (code, current) = http.get(name);
    let (code, body) = match code {
        404 => http.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(crd),
        ),
        _ => {
            let mut next = crd.clone();
            next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            http.request("PUT", name, Some(&next))
        }
    };
    assert!(code == 200 || code == 201, "{code} {body}");
    for version in versions {
        wait_for(WAIT, "the version to answer", || {
            (http.get(&path(version)).0 == 200).then_some(())
        });
    }
}

fn items(answer: &Value) -> Vec<Value> {
    answer["items"].as_array().cloned().unwrap_or_default()
}

fn two_versions_without_conversion(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    apply_crd(&mut http, &crd(true), &["v1", "v2"]);

    // Discovery lists both versions, v2 preferred (kube's version order).
    let (_, group) = http.get("/apis/example.com");
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    for version in ["v1", "v2"] {
        let (code, list) = http.get(&format!("/apis/example.com/{version}"));
        assert_eq!(code, 200);
        assert_eq!(list["resources"][0]["name"], "widgets", "{list}");
    }
    // A version not served is neither discovered nor routed.
    assert_eq!(http.get(&path("v1alpha1")).0, 404);
    let aggregated = cluster.kubectl.ok(&["api-versions"]);
    assert!(!aggregated.contains("example.com/v1alpha1"), "{aggregated}");
    assert!(
        aggregated.contains("example.com/v1") && aggregated.contains("example.com/v2"),
        "{aggregated}"
    );

    // Each write is validated against its own version's schema.
    let (code, refused) = http.request(
        "POST",
        &path("v1"),
        Some(&widget("v1", "long", json!({"size": "enormous"}))),
    );
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("spec.size"),
        "{refused}"
    );
    let (code, _) = http.request(
        "POST",
        &path("v2"),
        Some(&widget(
            "v2",
            "long",
            json!({"size": "enormous", "note": "n"}),
        )),
    );
    assert_eq!(code, 201);
    let (code, _) = http.request(
        "POST",
        &path("v1"),
        Some(&widget("v1", "small", json!({"size": "tiny"}))),
    );
    assert_eq!(code, 201);
    // Stored in v1, the storage version, whichever version wrote them.
    assert_eq!(stored(&cluster, "long")["apiVersion"], "example.com/v1");
    assert_eq!(stored(&cluster, "small")["apiVersion"], "example.com/v1");

    // Read, listed and watched in either version.
    let mut watch = WatchEvents::open(
        cluster.port,
        &format!("{}?watch=1&resourceVersion=0", path("v2")),
    );
    for version in ["v1", "v2"] {
        let api_version = format!("example.com/{version}");
        let (_, small) = http.get(&format!("{}/small", path(version)));
        assert_eq!(small["apiVersion"], api_version.as_str());
        assert_eq!(small["spec"]["size"], "tiny");
        let (_, list) = http.get(&path(version));
        let listed = items(&list);
        assert_eq!(listed.len(), 2);
        assert!(
            listed
                .iter()
                .all(|o| o["apiVersion"] == api_version.as_str()),
            "{list}"
        );
    }
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = watch.next(WAIT).expect("an initial watch event");
        assert_eq!(event["object"]["apiVersion"], "example.com/v2", "{event}");
        seen.push(
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    http.request(
        "POST",
        &path("v1"),
        Some(&widget("v1", "later", json!({"size": "s"}))),
    );
    let event = watch.next(WAIT).expect("the new object's event");
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["apiVersion"].as_str()
        ),
        (Some("ADDED"), Some("example.com/v2"))
    );
    let got = cluster.kubectl.ok(&[
        "get",
        "widgets.v1.example.com",
        "small",
        "-o",
        "jsonpath={.apiVersion}",
    ]);
    assert_eq!(got, "example.com/v1");
    let got = cluster
        .kubectl
        .ok(&["get", "widgets", "small", "-o", "jsonpath={.apiVersion}"]);
    assert_eq!(got, "example.com/v2");

    // The storage version moves to v2: new writes are stored as v2, the
    // objects stored as v1 stay readable in both, storedVersions has both.
    apply_crd(&mut http, &crd(false), &["v1", "v2"]);
    let mut attempt = 0;
    wait_for(WAIT, "writes to be stored as v2", || {
        attempt += 1;
        let name = format!("moved-{attempt}");
        let (code, body) = http.request(
            "POST",
            &path("v1"),
            Some(&widget("v1", &name, json!({"size": "s"}))),
        );
        assert_eq!(code, 201, "{body}");
        (stored(&cluster, &name)["apiVersion"] == "example.com/v2").then_some(())
    });
    assert_eq!(stored(&cluster, "small")["apiVersion"], "example.com/v1");
    for version in ["v1", "v2"] {
        let (code, small) = http.get(&format!("{}/small", path(version)));
        assert_eq!(
            (code, small["apiVersion"].as_str()),
            (200, Some(format!("example.com/{version}").as_str()))
        );
    }
    let (_, crd) =
        http.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1", "v2"]));
}

/// Renames `spec.size` (v1) to `spec.dimension` (v2) and back.
fn rename(review: &Value) -> Reply {
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let (from, to) = match desired {
        "example.com/v2" => ("size", "dimension"),
        _ => ("dimension", "size"),
    };
    let converted: Vec<Value> = items(&json!({"items": request["objects"]}))
        .into_iter()
        .map(|mut o| {
            if let Some(value) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                o["spec"][to] = value;
            }
            o["apiVersion"] = desired.into();
            o
        })
        .collect();
    Reply::Review(json!({"convertedObjects": converted, "result": {"status": "Success"}}))
}

fn webhook_crd(url: &str, ca_bundle: &str) -> Value {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca_bundle}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("dimension")}]}})
}

fn a_conversion_webhook_renames_a_field(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let hook_dir = cluster.dir.path().join("hook");
    std::fs::create_dir_all(&hook_dir).expect("a folder for the webhook's certificates");
    let hook = Webhook::start(&hook_dir, &[], Arc::new(rename));
    let mut http = Http::connect(cluster.port);
    apply_crd(
        &mut http,
        &webhook_crd(&hook.url("/convert"), &hook.ca_bundle()),
        &["v1", "v2"],
    );

    let (code, created) = http.request(
        "POST",
        &path("v2"),
        Some(&widget("v2", "a", json!({"dimension": "big"}))),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"], json!({"dimension": "big"}));
    let raw = stored(&cluster, "a");
    assert_eq!(
        (raw["apiVersion"].as_str(), &raw["spec"]),
        (Some("example.com/v1"), &json!({"size": "big"}))
    );
    assert!(hook.calls() > 0);
    let (_, v1) = http.get(&format!("{}/a", path("v1")));
    assert_eq!(v1["spec"], json!({"size": "big"}));
    let (_, v2) = http.get(&format!("{}/a", path("v2")));
    assert_eq!(v2["spec"], json!({"dimension": "big"}));
    // Updates in v2 go through the webhook both ways.
    let mut changed = v2.clone();
    changed["spec"]["dimension"] = "bigger".into();
    let (code, _) = http.request("PUT", &format!("{}/a", path("v2")), Some(&changed));
    assert_eq!(code, 200);
    assert_eq!(stored(&cluster, "a")["spec"], json!({"size": "bigger"}));

    let mut watch = WatchEvents::open(
        cluster.port,
        &format!("{}?watch=1&resourceVersion=0", path("v2")),
    );
    let event = watch.next(WAIT).expect("the initial event");
    assert_eq!(
        event["object"]["spec"],
        json!({"dimension": "bigger"}),
        "{event}"
    );

    // The cost of the webhook on a list (printed, not asserted).
    const N: usize = 200;
    for i in 0..N {
        let (code, _) = http.request(
            "POST",
            &path("v1"),
            Some(&widget("v1", &format!("w{i}"), json!({"size": "s"}))),
        );
        assert_eq!(code, 201);
    }
    let event = watch.next(WAIT).expect("an event for a v1 write");
    assert_eq!(event["object"]["apiVersion"], "example.com/v2");
    assert_eq!(event["object"]["spec"], json!({"dimension": "s"}));
    wait_for(WAIT, "every object to be listed", || {
        (items(&http.get(&path("v2")).1).len() == N + 1).then_some(())
    });
    for (version, what) in [
        ("v1", "storage version, no conversion"),
        ("v2", "through the webhook"),
    ] {
        let mut times = Vec::new();
        for _ in 0..10 {
            let started = Instant::now();
            let (_, list) = http.get(&path(version));
            times.push(started.elapsed());
            assert_eq!(items(&list).len(), N + 1);
        }
        times.sort();
        println!(
            "list of {} widgets in {version} ({what}): median {:?}, max {:?}",
            N + 1,
            times[5],
            times[9]
        );
    }

    // A webhook that cannot be reached: kube's 500, and nothing stored.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!(
        "https://127.0.0.1:{}/convert",
        dead.local_addr().unwrap().port()
    );
    drop(dead);
    apply_crd(
        &mut http,
        &webhook_crd(&dead_url, &hook.ca_bundle()),
        &["v1"],
    );
    // Reading a v1-stored object in v2 needs the webhook: once that
    // fails, the new configuration is in use.
    wait_for(WAIT, "the new webhook to be used", || {
        (http.get(&format!("{}/a", path("v2"))).0 == 500).then_some(())
    });
    let never = widget("v2", "never", json!({"dimension": "x"}));
    let (code, refused) = http.request("POST", &path("v2"), Some(&never));
    assert_eq!(code, 500, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal error occurred: conversion webhook for example.com/v2, Kind=Widget failed: Post \"https://127.0.0.1:"),
        "{message}"
    );
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    assert_eq!(refused["reason"], "InternalError");
    let (code, _) = http.get(&format!("{}/never", path("v1")));
    assert_eq!(code, 404);
}
