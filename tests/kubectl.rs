//! kubectl 1.32, used as a person would, against the real binaries:
//! `capstan-apiserver` on `capstan-store`, and the embedded `capstan`:
//! namespaces, apply and reading back, watching. Edits, generators and
//! discovery are in `kubectl_edits.rs`.

use std::process::Stdio;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Embedded};
use capstan_tests::kubectl::{without_root_ca, Lines};
use capstan_tests::store::http_get;

/// A guard against hanging: how long an expected line may take.
const PATIENCE: Duration = Duration::from_secs(30);

const APP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web}}
data: {mode: blue}
---
apiVersion: v1
kind: Pod
metadata: {name: demo, labels: {app: web, tier: front}}
spec:
  containers: [{name: app, image: "nginx:1.25"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.25"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"#;

capstan_tests::on_both_backends!(
    apply_then_apply_again_and_read_back_in_every_form,
    get_watch_sees_added_modified_deleted,
);

#[test]
fn embedded_capstan_serves_namespaces_from_its_own_kubeconfig() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    let namespaces = kubectl.ok(&["get", "ns"]);
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(namespaces.contains(name), "{namespaces}");
    }
    assert!(
        namespaces.starts_with("NAME") && namespaces.contains("STATUS"),
        "a Table: {namespaces}"
    );
    assert_eq!(
        kubectl.ok(&["create", "namespace", "team-a"]).trim(),
        "namespace/team-a created"
    );
    assert!(kubectl.ok(&["get", "ns", "team-a"]).contains("Active"));
    kubectl.ok(&[
        "create",
        "configmap",
        "inside",
        "-n",
        "team-a",
        "--from-literal=k=v",
    ]);

    let refused = kubectl.fails(&["run", "lost", "--image=nginx", "-n", "nowhere"]);
    assert!(
        refused.contains("NotFound") && refused.contains("namespaces \"nowhere\" not found"),
        "{refused}"
    );

    kubectl.ok(&[
        "delete",
        "namespace",
        "team-a",
        "--wait=true",
        "--timeout=20s",
    ]);
    let gone = kubectl.fails(&["get", "ns", "team-a"]);
    assert!(gone.contains("NotFound"), "{gone}");
    let leftovers = kubectl.ok(&["get", "configmaps", "-A", "-o", "name"]);
    assert!(
        !leftovers.contains("inside"),
        "namespace contents are removed: {leftovers}"
    );
    assert!(
        http_get(capstan.port, "/readyz").is_some(),
        "the embedded server still serves after the namespace deletion"
    );
}

fn apply_then_apply_again_and_read_back_in_every_form(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let created = kubectl.ok_with_input(&["apply", "-f", "-"], APP);
    for line in [
        "configmap/settings created",
        "pod/demo created",
        "deployment.apps/web created",
        "service/web created",
    ] {
        assert!(created.contains(line), "{created}");
    }
    // Server defaults (container fields, cluster IPs) must not make kubectl
    // see a change: it diffs lists by the merge keys OpenAPI declares.
    let unchanged = kubectl.ok_with_input(&["apply", "-f", "-"], APP);
    for line in [
        "configmap/settings unchanged",
        "pod/demo unchanged",
        "deployment.apps/web unchanged",
        "service/web unchanged",
    ] {
        assert!(unchanged.contains(line), "{unchanged}");
    }
    let edited = APP
        .replace("mode: blue", "mode: green")
        .replace("nginx:1.25", "nginx:1.27");
    let configured = kubectl.ok_with_input(&["apply", "-f", "-"], &edited);
    assert!(
        configured.contains("configmap/settings configured")
            && configured.contains("deployment.apps/web configured"),
        "{configured}"
    );
    assert_eq!(
        kubectl.ok(&["get", "cm", "settings", "-o", "jsonpath={.data.mode}"]),
        "green"
    );
    assert_eq!(
        kubectl.ok(&[
            "get",
            "pod",
            "demo",
            "-o",
            "jsonpath={.spec.containers[0].image}"
        ]),
        "nginx:1.27"
    );
    assert_eq!(
        kubectl.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.generation}"
        ]),
        "2"
    );

    let pods = kubectl.ok(&["get", "pods"]);
    assert!(
        pods.contains("READY")
            && pods.contains("STATUS")
            && pods.contains("RESTARTS")
            && pods.contains("Pending"),
        "{pods}"
    );
    let wide = kubectl.ok(&["get", "deploy", "-o", "wide"]);
    assert!(
        wide.contains("IMAGES") && wide.contains("nginx:1.27") && wide.contains("app=web"),
        "{wide}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&kubectl.ok(&["get", "svc", "web", "-o", "json"])).unwrap();
    assert_eq!(json["spec"]["ports"][0]["targetPort"], 80);
    assert!(kubectl
        .ok(&["get", "cm", "settings", "-o", "yaml"])
        .contains("mode: green"));
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "pods,cm",
                "-l",
                "tier=front,!pod-template-hash",
                "-o",
                "name"
            ])
            .trim(),
        "pod/demo"
    );
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "pods",
                "--field-selector",
                "status.phase=Pending",
                "-l",
                "!pod-template-hash",
                "-o",
                "name"
            ])
            .trim(),
        "pod/demo"
    );
    assert!(kubectl
        .ok(&["get", "pods", "--field-selector", "status.phase=Running"])
        .is_empty());
    let bad = kubectl.fails(&["get", "pods", "--field-selector", "spec.foo=bar"]);
    assert!(bad.contains("field label not supported: spec.foo"), "{bad}");
    let everywhere = kubectl.ok(&["get", "cm", "-A"]);
    assert!(
        everywhere.contains("NAMESPACE") && everywhere.contains("settings"),
        "{everywhere}"
    );
    // Five: every cluster also has the `kubernetes` service in default
    // (and the `kube-root-ca.crt` ConfigMap, left out here, as are the
    // Deployment's pods).
    let chunked = kubectl.ok(&[
        "get",
        "deploy,svc,cm,pods",
        "-l",
        "!pod-template-hash",
        "--chunk-size=1",
        "-o",
        "name",
    ]);
    let chunked = without_root_ca(&chunked);
    assert_eq!(chunked.lines().count(), 5, "{chunked}");
    assert!(chunked.contains("service/kubernetes"), "{chunked}");
    let all = kubectl.ok(&["get", "all"]);
    assert!(
        all.contains("pod/demo")
            && all.contains("service/web")
            && all.contains("deployment.apps/web"),
        "{all}"
    );
    let columns = kubectl.ok(&[
        "get",
        "pods",
        "-o",
        "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image",
    ]);
    assert!(
        columns.contains("demo") && columns.contains("nginx:1.27"),
        "{columns}"
    );

    let strict = kubectl.run_with_input(
        &["apply", "-f", "-"],
        &edited.replace("replicas: 2", "replicas: 2\n  bogusField: 1"),
    );
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        !strict.status.success() && stderr.contains("unknown field \"spec.bogusField\""),
        "{stderr}"
    );
}

fn get_watch_sees_added_modified_deleted(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "configmap", "marker"]);
    let mut watch = kubectl
        .command(&["get", "configmaps", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::of(watch.stdout.take().unwrap());
    // kubectl watches from the revision of its list, so once the marker
    // (created first) is printed, no later write can be missed.
    while !lines
        .next(PATIENCE, "the marker's ADDED line")
        .contains("marker")
    {}
    kubectl.ok(&["create", "configmap", "watched", "--from-literal=a=1"]);
    kubectl.ok(&["label", "configmap", "watched", "seen=yes"]);
    kubectl.ok(&["delete", "configmap", "watched"]);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let line = lines.next(
            PATIENCE,
            &format!("the 3 events of 'watched' after {seen:?}"),
        );
        if line.contains("watched") {
            seen.push(line.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(seen, vec!["ADDED", "MODIFIED", "DELETED"]);
}
