//! Server-side apply and managedFields against the real binaries, driven
//! by kubectl 1.32 (`apply --server-side`, conflicts with `scale` and
//! `patch`, `--force-conflicts`, `--dry-run=server`, the migration from
//! client-side apply) and by kube-rs (`Patch::Apply`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::http::Connection;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, team: blue}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: "nginx:1.25"
        ports: [{containerPort: 80}, {containerPort: 443}]
"#;

const CONFIGMAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web, tier: front}}
data: {mode: blue, size: large}
"#;

capstan_tests::on_both_backends!(
    kubectl_apply_server_side_conflicts_force_prune_and_dry_run,
    client_side_apply_then_server_side_apply_migrates,
);

mod kube_rs {
    use super::*;
    capstan_tests::on_both_backends!(async: kube_rs_apply_with_force_and_apply_options);
}

fn get_json(kubectl: &Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl prints JSON")
}

fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}/{}",
                e["manager"].as_str().unwrap_or(""),
                e["operation"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn kubectl_apply_server_side_conflicts_force_prune_and_dry_run(backend: Backend) {
    // The Deployment's resourceVersion is compared across applies: no
    // controller may write its status meanwhile.
    let cluster = ApiCluster::start_with(backend, |_| {
        vec!["--disable-controller-manager=true".to_string()]
    });
    let kubectl = &cluster.kubectl;
    let ssa = ["apply", "--server-side", "-f", "-"];
    let out = kubectl.ok_with_input(&ssa, DEPLOYMENT);
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");

    // managedFields as kube-apiserver writes them.
    let yaml = kubectl.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "yaml",
        "--show-managed-fields",
    ]);
    for expected in [
        "manager: kubectl",
        "operation: Apply",
        "fieldsType: FieldsV1",
        "f:replicas: {}",
        "k:{\"name\":\"web\"}:",
        "k:{\"containerPort\":443,\"protocol\":\"TCP\"}:",
        ".: {}",
    ] {
        assert!(yaml.contains(expected), "{expected} in:\n{yaml}");
    }
    let plain = kubectl.ok(&["get", "deploy", "web", "-o", "yaml"]);
    assert!(
        !plain.contains("managedFields"),
        "hidden by default:\n{plain}"
    );

    // Applying the same file again changes nothing.
    let before = get_json(kubectl, &["deploy", "web"]);
    kubectl.ok_with_input(&ssa, DEPLOYMENT);
    let after = get_json(kubectl, &["deploy", "web"]);
    assert_eq!(
        before["metadata"]["resourceVersion"],
        after["metadata"]["resourceVersion"]
    );

    // `kubectl scale` takes spec.replicas: applying 2 again is a conflict.
    kubectl.ok(&["scale", "deployment", "web", "--replicas=5"]);
    let scaled = get_json(kubectl, &["deploy", "web"]);
    let scaler = scaled["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subresource"] == "scale")
        .unwrap_or_else(|| panic!("a scale entry: {:?}", managers(&scaled)));
    assert_eq!(scaler["operation"], "Update");
    assert_eq!(scaler["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    let refused = kubectl.run_with_input(&ssa, DEPLOYMENT);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("Apply failed with 1 conflict: conflict with")
            && stderr.contains("with subresource \"scale\"")
            && stderr.contains(".spec.replicas")
            && stderr.contains("--force-conflicts"),
        "{stderr}"
    );
    assert_eq!(
        kubectl.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );
    kubectl.ok_with_input(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        DEPLOYMENT,
    );
    let forced = get_json(kubectl, &["deploy", "web"]);
    assert_eq!(forced["spec"]["replicas"], 2);
    assert!(
        !forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["subresource"] == "scale"),
        "the scaler lost its only field: {:?}",
        managers(&forced)
    );

    // `kubectl patch` does likewise; the same value is shared, not a conflict.
    kubectl.ok(&[
        "patch",
        "deploy",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    let stderr = kubectl.run_with_input(&ssa, DEPLOYMENT).stderr;
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(
        stderr.contains("conflict with \"kubectl-patch\" using apps/v1: .spec.replicas"),
        "{stderr}"
    );
    kubectl.ok_with_input(&ssa, &DEPLOYMENT.replace("replicas: 2", "replicas: 3"));
    let shared = get_json(kubectl, &["deploy", "web"]);
    assert!(
        entry(&shared, "kubectl-patch", "Update").is_some(),
        "{:?}",
        managers(&shared)
    );
    assert!(
        entry(&shared, "kubectl", "Apply").unwrap()["fieldsV1"]["f:spec"]["f:replicas"].is_object()
    );

    // A label and a port left out of the file are removed.
    let trimmed = DEPLOYMENT
        .replace(", team: blue", "")
        .replace(", {containerPort: 443}", "")
        .replace("replicas: 2", "replicas: 3");
    kubectl.ok_with_input(&ssa, &trimmed);
    let pruned = get_json(kubectl, &["deploy", "web"]);
    assert_eq!(pruned["metadata"]["labels"], json!({"app": "web"}));
    let ports = &pruned["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert_eq!(ports.as_array().map(Vec::len), Some(1), "{ports}");

    // --dry-run=server answers as if applied and changes nothing.
    let rv = pruned["metadata"]["resourceVersion"].clone();
    let changed = trimmed.replace("nginx:1.25", "nginx:1.27");
    let out = kubectl.ok_with_input(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &changed,
    );
    assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    let out = kubectl.ok_with_input(
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            "-",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
        &changed,
    );
    assert_eq!(out, "nginx:1.27");
    let unchanged = get_json(kubectl, &["deploy", "web"]);
    assert_eq!(unchanged["metadata"]["resourceVersion"], rv);
    assert_eq!(
        unchanged["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
    // A dry-run create creates nothing either.
    kubectl.ok_with_input(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        CONFIGMAP,
    );
    assert!(kubectl
        .fails(&["get", "cm", "settings"])
        .contains("NotFound"));

    // Other field managers; every write records its own.
    kubectl.ok_with_input(
        &["apply", "--server-side", "--field-manager=ci", "-f", "-"],
        CONFIGMAP,
    );
    kubectl.ok(&["label", "cm", "settings", "extra=yes"]);
    let cm = get_json(kubectl, &["cm", "settings"]);
    let ci = entry(&cm, "ci", "Apply").unwrap_or_else(|| panic!("{:?}", managers(&cm)));
    assert_eq!(
        ci["fieldsV1"]["f:data"],
        json!({"f:mode": {}, "f:size": {}})
    );
    let labeler =
        entry(&cm, "kubectl-label", "Update").unwrap_or_else(|| panic!("{:?}", managers(&cm)));
    assert_eq!(
        labeler["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:extra": {}}}})
    );
}

fn client_side_apply_then_server_side_apply_migrates(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    assert!(kubectl
        .ok_with_input(&["apply", "-f", "-"], CONFIGMAP)
        .contains("created"));
    let created = get_json(kubectl, &["cm", "settings"]);
    let csa = entry(&created, "kubectl-client-side-apply", "Update")
        .unwrap_or_else(|| panic!("{:?}", managers(&created)));
    assert!(csa["fieldsV1"]["f:metadata"]["f:annotations"]
        ["f:kubectl.kubernetes.io/last-applied-configuration"]
        .is_object());

    // kubectl moves the client-side apply fields to its Apply manager.
    let out = kubectl.ok_with_input(&["apply", "--server-side", "-f", "-"], CONFIGMAP);
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let migrated = get_json(kubectl, &["cm", "settings"]);
    assert!(
        entry(&migrated, "kubectl-client-side-apply", "Update").is_none(),
        "{:?}",
        managers(&migrated)
    );
    assert!(
        entry(&migrated, "kubectl", "Apply").is_some(),
        "{:?}",
        managers(&migrated)
    );
    assert!(
        entry(&migrated, "kubectl-last-applied", "Apply").is_some(),
        "{:?}",
        managers(&migrated)
    );

    // An edit, then a server-side apply without a key and a label.
    std::fs::write(
        cluster.dir.path().join("editor.sh"),
        "#!/bin/sh\nsed -i 's/^  size: .*/  size: small/' \"$1\"\n",
    )
    .unwrap();
    let editor = cluster.dir.path().join("editor.sh");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    let edited = kubectl
        .command(&["edit", "cm", "settings"])
        .env("KUBE_EDITOR", &editor)
        .output()
        .unwrap();
    assert!(
        edited.status.success(),
        "{}",
        String::from_utf8_lossy(&edited.stderr)
    );
    let after_edit = get_json(kubectl, &["cm", "settings"]);
    assert_eq!(after_edit["data"]["size"], "small");
    assert!(
        entry(&after_edit, "kubectl-edit", "Update").is_some(),
        "{:?}",
        managers(&after_edit)
    );

    let trimmed = CONFIGMAP
        .replace(", tier: front", "")
        .replace(", size: large", "");
    kubectl.ok_with_input(&["apply", "--server-side", "-f", "-"], &trimmed);
    let pruned = get_json(kubectl, &["cm", "settings"]);
    assert_eq!(pruned["metadata"]["labels"], json!({"app": "web"}));
    // The edited key belongs to kubectl-edit now, so it stays.
    assert_eq!(pruned["data"], json!({"mode": "blue", "size": "small"}));
    // Once kubectl alone owns it (forced to another value; the same
    // value would be shared), leaving it out removes it.
    kubectl.ok_with_input(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        CONFIGMAP,
    );
    kubectl.ok_with_input(&["apply", "--server-side", "-f", "-"], &trimmed);
    let pruned = get_json(kubectl, &["cm", "settings"]);
    assert_eq!(pruned["data"], json!({"mode": "blue"}));
    let last = pruned["metadata"]["annotations"]
        ["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    assert!(!last.contains("size"), "kept up to date: {last}");
}

/// A raw request, answered with the status and the JSON body; a dropped
/// connection or a body that is not JSON fails the test.
fn raw(port: u16, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", content_type),
    ];
    let response = Connection::connect(port)
        .and_then(|mut c| c.send(method, path, &headers, body.as_bytes()))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let json = response
        .json()
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    (response.status, json)
}

fn kube_client(port: u16) -> kube::Client {
    let config = capstan_tests::tls::kube_config(port);
    kube::Client::try_from(config).expect("a kube client")
}

async fn kube_rs_apply_with_force_and_apply_options(backend: Backend) {
    let cluster = tokio::task::block_in_place(|| ApiCluster::start_on(backend));
    let client = kube_client(cluster.port);
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let config = |replicas: i64, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kr"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "kr"}},
                "template": {"metadata": {"labels": {"app": "kr"}},
                    "spec": {"containers": [{"name": "app", "image": image}]}}}})
    };
    let forced = PatchParams::apply("mgr").force();
    let created = deployments
        .patch("kr", &forced, &Patch::Apply(config(2, "nginx:1.25")))
        .await
        .unwrap();
    assert_eq!(created.spec.as_ref().unwrap().replicas, Some(2));
    let fields = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].manager.as_deref(), Some("mgr"));
    assert_eq!(fields[0].operation.as_deref(), Some("Apply"));

    // Another manager changing mgr's field: a 409 Conflict with causes...
    let other = PatchParams::apply("other");
    let err = deployments
        .patch("kr", &other, &Patch::Apply(config(4, "nginx:1.25")))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                status.message,
                "Apply failed with 1 conflict: conflict with \"mgr\": .spec.replicas"
            );
        }
        other => panic!("not an API error: {other}"),
    }
    // ...and nothing written.
    let now = deployments.get("kr").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        created.metadata.resource_version
    );
    // Forced, it takes the field; mgr keeps the rest.
    let taken = deployments
        .patch(
            "kr",
            &PatchParams::apply("other").force(),
            &Patch::Apply(config(4, "nginx:1.25")),
        )
        .await
        .unwrap();
    assert_eq!(taken.spec.as_ref().unwrap().replicas, Some(4));
    let value = serde_json::to_value(&taken).unwrap();
    let mgr = entry(&value, "mgr", "Apply").unwrap();
    assert!(
        mgr["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "{mgr}"
    );
    assert!(entry(&value, "other", "Apply").is_some());

    // A ConfigMap, created and updated by apply, with a dry run between.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kr"}, "data": data});
    cms.patch(
        "kr",
        &forced,
        &Patch::Apply(cm(json!({"a": "1", "b": "2"}))),
    )
    .await
    .unwrap();
    let dry = PatchParams::apply("mgr").force().dry_run();
    let planned = cms
        .patch("kr", &dry, &Patch::Apply(cm(json!({"a": "9"}))))
        .await
        .unwrap();
    assert_eq!(planned.data.unwrap().len(), 1);
    assert_eq!(cms.get("kr").await.unwrap().data.unwrap().len(), 2);
    let applied = cms
        .patch("kr", &forced, &Patch::Apply(cm(json!({"a": "9"}))))
        .await
        .unwrap();
    assert_eq!(
        applied.data.unwrap(),
        [("a".to_string(), "9".to_string())].into()
    );

    // The PatchOptions rules, as kube-apiserver answers them.
    let path = "/api/v1/namespaces/default/configmaps/kr";
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kr"},"data":{"a":"0"}}"#;
    let (code, status) = raw(
        cluster.port,
        "PATCH",
        path,
        "application/apply-patch+yaml",
        body,
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "fieldManager");
    let (code, _) = raw(
        cluster.port,
        "PATCH",
        &format!("{path}?force=true"),
        "application/merge-patch+json",
        "{}",
    );
    assert_eq!(code, 422);
    // YAML bodies are applies too.
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kr\ndata:\n  a: \"7\"\n";
    let (code, obj) = raw(
        cluster.port,
        "PATCH",
        &format!("{path}?fieldManager=mgr&force=true"),
        "application/apply-patch+yaml",
        yaml,
    );
    assert_eq!((code, &obj["data"]), (200, &json!({"a": "7"})), "{obj}");
    let (code, obj) = raw(
        cluster.port,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/fresh?fieldManager=mgr",
        "application/apply-patch+yaml",
        &yaml.replace("name: kr", "name: fresh"),
    );
    assert_eq!(code, 201, "{obj}");
    // Sending an empty managedFields list clears them.
    let (code, obj) = raw(
        cluster.port,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/fresh",
        "application/merge-patch+json",
        r#"{"metadata":{"managedFields":[]}}"#,
    );
    assert_eq!(code, 200);
    assert!(obj["metadata"].get("managedFields").is_none(), "{obj}");
}
