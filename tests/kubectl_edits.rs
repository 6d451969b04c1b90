//! kubectl 1.32 changing things as a person would, against
//! `capstan-apiserver` on both backends: the `create` generators, label,
//! annotate, patch, scale, edit, replace and its conflict, delete by
//! label and `--all`; discovery, explain and logs.

use capstan_tests::apiserver::{ApiCluster, Backend};
use capstan_tests::kubectl::without_root_ca;

capstan_tests::on_both_backends!(
    edits_generators_scale_and_conflicts,
    edit_delete_by_label_and_all_discovery_explain_and_logs,
);

fn edits_generators_scale_and_conflicts(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    assert_eq!(
        kubectl
            .ok(&["create", "configmap", "cfg", "--from-literal=a=b"])
            .trim(),
        "configmap/cfg created"
    );
    assert!(kubectl
        .fails(&["create", "configmap", "cfg", "--from-literal=a=b"])
        .contains("already exists"));
    assert_eq!(
        kubectl
            .ok(&[
                "create",
                "secret",
                "generic",
                "pw",
                "--from-literal=user=admin"
            ])
            .trim(),
        "secret/pw created"
    );
    assert_eq!(
        kubectl.ok(&["get", "secret", "pw", "-o", "jsonpath={.data.user}"]),
        "YWRtaW4="
    );
    assert_eq!(
        kubectl.ok(&["get", "secret", "pw", "-o", "jsonpath={.type}"]),
        "Opaque"
    );
    assert_eq!(
        kubectl.ok(&["create", "namespace", "gen"]).trim(),
        "namespace/gen created"
    );
    assert_eq!(
        kubectl
            .ok(&[
                "create",
                "deployment",
                "api",
                "--image=nginx:1.27",
                "--replicas=2"
            ])
            .trim(),
        "deployment.apps/api created"
    );
    assert_eq!(
        kubectl
            .ok(&["create", "service", "clusterip", "api", "--tcp=80:8080"])
            .trim(),
        "service/api created"
    );
    assert!(kubectl
        .ok(&[
            "create",
            "configmap",
            "dry",
            "--from-literal=a=b",
            "--dry-run=server"
        ])
        .contains("server dry run"));
    assert!(kubectl.fails(&["get", "cm", "dry"]).contains("NotFound"));

    kubectl.ok(&["label", "cm", "cfg", "env=prod"]);
    kubectl.ok(&["annotate", "cm", "cfg", "owner=ops"]);
    kubectl.ok(&["label", "cm", "cfg", "env-"]);
    assert_eq!(
        kubectl.ok(&[
            "get",
            "cm",
            "cfg",
            "-o",
            "jsonpath={.metadata.labels.env}{.metadata.annotations.owner}"
        ]),
        "ops"
    );
    kubectl.ok(&[
        "patch",
        "cm",
        "cfg",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"c":"d"}}"#,
    ]);
    kubectl.ok(&[
        "patch",
        "cm",
        "cfg",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/data/a"}]"#,
    ]);
    kubectl.ok(&[
        "patch",
        "deploy",
        "api",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#,
    ]);
    assert_eq!(
        kubectl.ok(&["get", "cm", "cfg", "-o", "jsonpath={.data}"]),
        r#"{"c":"d"}"#
    );
    assert_eq!(
        kubectl.ok(&[
            "get",
            "deploy",
            "api",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image}"
        ]),
        "nginx:1.28"
    );

    assert_eq!(
        kubectl
            .ok(&["scale", "deploy", "api", "--replicas=5"])
            .trim(),
        "deployment.apps/api scaled"
    );
    assert_eq!(
        kubectl.ok(&["get", "deploy", "api", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );
    kubectl.ok(&[
        "scale",
        "deploy",
        "api",
        "--current-replicas=5",
        "--replicas=1",
    ]);
    assert!(kubectl
        .fails(&[
            "scale",
            "deploy",
            "api",
            "--current-replicas=5",
            "--replicas=3"
        ])
        .contains("Expected replicas to be 5"));

    let stale = kubectl.ok(&["get", "cm", "cfg", "-o", "yaml"]);
    let replaced = kubectl.ok_with_input(&["replace", "-f", "-"], &stale.replace("c: d", "c: e"));
    assert!(replaced.contains("configmap/cfg replaced"), "{replaced}");
    let conflict = kubectl.run_with_input(&["replace", "-f", "-"], &stale);
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        !conflict.status.success()
            && stderr.contains("Conflict")
            && stderr.contains("the object has been modified"),
        "{stderr}"
    );

    kubectl.ok(&["delete", "cm", "cfg"]);
    assert!(kubectl.fails(&["get", "cm", "cfg"]).contains("NotFound"));
}

// node-1 exists so that the pod garbage collector does not take `placed`
// for an orphan (its node missing) while the test runs.
const PODS: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-1}
---
apiVersion: v1
kind: Pod
metadata: {name: unplaced, labels: {tier: x}}
spec:
  containers: [{name: app, image: "nginx:1.25"}]
---
apiVersion: v1
kind: Pod
metadata: {name: placed}
spec:
  nodeName: node-1
  containers: [{name: app, image: "nginx:1.25"}, {name: side, image: "busybox"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.25"}]}
"#;

fn edit_delete_by_label_and_all_discovery_explain_and_logs(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], PODS);

    // kubectl edit with EDITOR set to a script that rewrites the file.
    let editor = cluster.dir.path().join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i \"$EDIT_SED\" \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let edit = |args: &[&str], sed: &str| {
        let output = kubectl
            .command(args)
            .env("EDITOR", &editor)
            .env("EDIT_SED", sed)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "kubectl {args:?}: {stdout}{stderr}"
        );
        stdout
    };
    kubectl.ok(&["create", "configmap", "e", "--from-literal=mode=blue"]);
    let edited = edit(&["edit", "cm", "e"], "s/mode: blue/mode: edited/");
    assert_eq!(edited.trim(), "configmap/e edited");
    assert_eq!(
        kubectl.ok(&["get", "cm", "e", "-o", "jsonpath={.data.mode}"]),
        "edited"
    );
    let edited = edit(&["edit", "deploy", "web"], "s/replicas: 2/replicas: 4/");
    assert_eq!(edited.trim(), "deployment.apps/web edited");
    assert_eq!(
        kubectl.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas}/{.metadata.generation}"
        ]),
        "4/2"
    );
    let unchanged = edit(&["edit", "cm", "e"], "s/no such text//");
    assert!(unchanged.is_empty(), "{unchanged}");

    // Logs, as kube answers them: empty for a pod no node has taken; for
    // a pod on a node with no address, why its kubelet cannot be reached.
    assert_eq!(kubectl.ok(&["logs", "unplaced"]), "");
    let placed = kubectl.fails(&["logs", "placed", "-c", "side"]);
    assert!(
        placed.contains("no preferred addresses found; known addresses: []"),
        "{placed}"
    );
    let missing = kubectl.fails(&["logs", "nobody"]);
    assert!(missing.contains("pods \"nobody\" not found"), "{missing}");

    // delete -l and delete --all.
    for (name, label) in [("l1", "tier=x"), ("l2", "tier=x"), ("l3", "tier=y")] {
        kubectl.ok(&["create", "configmap", name]);
        kubectl.ok(&["label", "configmap", name, label]);
    }
    let deleted = kubectl.ok(&["delete", "cm,pods", "-l", "tier=x"]);
    for line in [
        "configmap \"l1\" deleted",
        "configmap \"l2\" deleted",
        "pod \"unplaced\" deleted",
    ] {
        assert!(deleted.contains(line), "{deleted}");
    }
    assert_eq!(
        without_root_ca(&kubectl.ok(&["get", "cm", "-o", "name"])),
        "configmap/e\nconfigmap/l3"
    );
    let deleted = kubectl.ok(&["delete", "cm", "--all"]);
    assert!(
        deleted.contains("configmap \"e\" deleted") && deleted.contains("configmap \"l3\" deleted"),
        "{deleted}"
    );
    assert_eq!(
        without_root_ca(&kubectl.ok(&["get", "cm", "-o", "name"])),
        ""
    );
    assert_eq!(
        kubectl
            .ok(&["get", "pods", "-l", "!pod-template-hash", "-o", "name"])
            .trim(),
        "pod/placed"
    );

    // Discovery and OpenAPI as kubectl shows them.
    let resources = kubectl.ok(&["api-resources"]);
    let row = |name: &str| {
        resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no {name} in\n{resources}"))
    };
    assert_eq!(row("pods"), "pods po v1 true Pod");
    assert_eq!(
        row("deployments"),
        "deployments deploy apps/v1 true Deployment"
    );
    assert_eq!(row("namespaces"), "namespaces ns v1 false Namespace");
    assert_eq!(row("leases"), "leases coordination.k8s.io/v1 true Lease");
    let apps = kubectl.ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(apps.lines().any(|l| l == "deployments.apps"), "{apps}");
    let versions = kubectl.ok(&["api-versions"]);
    for version in ["v1", "apps/v1", "coordination.k8s.io/v1"] {
        assert!(versions.lines().any(|l| l == version), "{versions}");
    }
    let explained = kubectl.ok(&["explain", "pod.spec"]);
    assert!(
        explained.contains("KIND:       Pod")
            && explained.contains("FIELD: spec <PodSpec>")
            && explained.contains("containers\t<[]Container> -required-")
            && explained.contains("restartPolicy"),
        "{explained}"
    );
}
