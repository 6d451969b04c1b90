//! CustomResourceDefinitions end to end with kubectl 1.32: a CRD with a
//! status and a scale subresource, printer columns, a schema with
//! defaults, enums and bounds; its instances served, validated, pruned,
//! scaled and watched; the CRD's deletion removing them; a second API
//! server serving the CRDs it finds in storage; name conflicts refused.

use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiCluster, Backend, Http, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;

const WAIT: Duration = Duration::from_secs(20);

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [gadgetry]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: string, enum: [small, large]}
              replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
              color: {type: string, default: blue}
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, labels: {tier: a}}
spec: {size: small, bogus: true}
"#;

capstan_tests::on_both_backends!(
    a_custom_resource_is_served_validated_and_scaled,
    crds_are_checked_named_and_served_after_a_restart,
    custom_objects_go_with_their_namespace_and_their_owner,
);

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Applies the CRD and waits until its resource answers; returns how long
/// that took from the create (printed, not asserted).
fn create_crd(cluster: &ApiCluster) -> Duration {
    let started = Instant::now();
    cluster.kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
    let mut http = Http::connect(cluster.port);
    wait_for(WAIT, "the widgets resource to answer", || {
        let (code, _) = http.get("/apis/example.com/v1/namespaces/default/widgets");
        (code == 200).then_some(())
    });
    let served = started.elapsed();
    eprintln!("CRD create to served (kubectl apply + first 200): {served:?}");
    let established = cluster.kubectl.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ]);
    assert!(established.contains("condition met"), "{established}");
    served
}

fn a_custom_resource_is_served_validated_and_scaled(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    create_crd(&cluster);

    // Unknown fields are pruned, defaults applied.
    let created = kubectl.ok_with_input(&["apply", "--validate=false", "-f", "-"], WIDGET);
    assert!(
        created.contains("widget.example.com/w1 created"),
        "{created}"
    );
    let spec = kubectl.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec}"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({"size": "small", "replicas": 1, "color": "blue"})
    );
    let strict = kubectl.run_with_input(&["apply", "-f", "-"], &WIDGET.replace("w1", "w9"));
    assert!(
        stderr_of(&strict).contains("unknown field \"spec.bogus\""),
        "{}",
        stderr_of(&strict)
    );

    // Printer columns, short names and categories.
    let table = kubectl.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "REPLICAS", "AGE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["w1", "small", "1"], "{table}");
    assert!(kubectl.ok(&["get", "wd"]).contains("w1"));
    assert!(kubectl.ok(&["get", "gadgetry"]).contains("w1"));

    // Invalid objects are refused with kube's causes, nothing stored.
    let bad = WIDGET
        .replace("w1", "w2")
        .replace("size: small, bogus: true", "size: huge, replicas: 20");
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], &bad);
    let stderr = stderr_of(&refused);
    assert!(!refused.status.success());
    assert!(stderr.contains("The Widget \"w2\" is invalid"), "{stderr}");
    assert!(
        stderr.contains(
            "spec.size: Unsupported value: \"huge\": supported values: \"small\", \"large\""
        ),
        "{stderr}"
    );
    assert!(stderr.contains("spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"), "{stderr}");
    assert!(kubectl.run(&["get", "widget", "w2"]).status.code() != Some(0));

    // Selectors.
    assert!(kubectl
        .ok(&["get", "widgets", "-l", "tier=a"])
        .contains("w1"));
    let none = kubectl.run(&["get", "widgets", "-l", "tier=b"]);
    assert!(
        stderr_of(&none).contains("No resources found"),
        "{}",
        stderr_of(&none)
    );
    let by_name = kubectl.ok(&[
        "get",
        "widgets",
        "--field-selector",
        "metadata.name=w1",
        "-o",
        "name",
    ]);
    assert_eq!(by_name.trim(), "widget.example.com/w1");

    // Scale and status: spec only through the main resource, status only
    // through /status; generation follows the spec.
    let scaled = kubectl.ok(&["scale", "widget", "w1", "--replicas=3"]);
    assert!(scaled.contains("widget.example.com/w1 scaled"), "{scaled}");
    let get = |path: &str| kubectl.ok(&["get", "widget", "w1", "-o", &format!("jsonpath={path}")]);
    assert_eq!(get("{.spec.replicas}"), "3");
    assert_eq!(get("{.metadata.generation}"), "2");
    kubectl.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":3}}"#,
    ]);
    kubectl.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    assert_eq!(get("{.status.replicas}"), "3");
    assert_eq!(get("{.metadata.generation}"), "2");
    // A strategic merge patch (kubectl patch's default) needs merge keys
    // a schema does not have: refused as kube does, nothing changed.
    let strategic = kubectl.run(&["patch", "widget", "w1", "-p", r#"{"spec":{"color":"red"}}"#]);
    let stderr = stderr_of(&strategic);
    assert!(!strategic.status.success(), "{stderr}");
    // kubectl prefixes the server's 415 message with its own words; the
    // list the server gives leaves strategic merge out.
    assert!(
        stderr.ends_with(
            "accepted media types include: application/json-patch+json, \
             application/merge-patch+json, application/apply-patch+yaml\n"
        ),
        "{stderr}"
    );
    assert_eq!(get("{.spec.color}"), "blue");
    let scale = kubectl.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(
        (
            scale["spec"]["replicas"].as_i64(),
            scale["status"]["replicas"].as_i64()
        ),
        (Some(3), Some(3))
    );

    // A watch sees new instances.
    let watch = kubectl.spawn(&[
        "get",
        "widgets",
        "-w",
        "--output-watch-events",
        "-o",
        "name",
    ]);
    let lines = &watch.lines;
    assert_eq!(
        lines.next(WAIT, "the initial widget"),
        "widget.example.com/w1"
    );
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &WIDGET.replace("w1", "w3").replace(", bogus: true", ""),
    );
    assert_eq!(lines.next(WAIT, "the new widget"), "widget.example.com/w3");
    drop(watch);

    // Deleting the CRD deletes its instances and stops serving them.
    let deleted = kubectl.ok(&["delete", "crd", "widgets.example.com", "--timeout=30s"]);
    assert!(deleted.contains("deleted"), "{deleted}");
    let mut http = Http::connect(cluster.port);
    wait_for(WAIT, "the widgets resource to go", || {
        let (code, _) = http.get("/apis/example.com/v1/namespaces/default/widgets");
        (code == 404).then_some(())
    });
    create_crd(&cluster);
    let empty = kubectl.run(&["get", "widgets"]);
    assert!(
        stderr_of(&empty).contains("No resources found"),
        "{}",
        stderr_of(&empty)
    );
}

fn crds_are_checked_named_and_served_after_a_restart(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;

    let two_storage = CRD.replace("  versions:\n", "  versions:\n  - {name: v2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n");
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], &two_storage);
    let stderr = stderr_of(&refused);
    assert!(
        stderr.contains("spec.versions: Invalid value:")
            && stderr.contains("must have exactly one version marked as storage version"),
        "{stderr}"
    );
    let no_schema = CRD.replace(
        "    schema:\n      openAPIV3Schema:\n",
        "    x:\n      y:\n",
    );
    let refused = kubectl.run_with_input(&["create", "--validate=false", "-f", "-"], &no_schema);
    let stderr = stderr_of(&refused);
    assert!(
        stderr.contains(
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
        ),
        "{stderr}"
    );

    create_crd(&cluster);
    kubectl.ok_with_input(&["apply", "-f", "-"], &WIDGET.replace(", bogus: true", ""));

    // The same kind in the group under another plural: names refused.
    let clash = CRD
        .replace("widgets", "gadgets")
        .replace("singular: widget", "singular: gadget")
        .replace("[wd]", "[gd]");
    kubectl.ok_with_input(&["apply", "-f", "-"], &clash);
    let reason = wait_for(WAIT, "the name conflict", || {
        let path = r#"jsonpath={.status.conditions[?(@.type=="NamesAccepted")].reason}"#;
        let reason = kubectl.ok(&["get", "crd", "gadgets.example.com", "-o", path]);
        (!reason.is_empty()).then_some(reason)
    });
    assert_eq!(reason, "KindConflict");
    let path = r#"jsonpath={.status.conditions[?(@.type=="NamesAccepted")].message}"#;
    assert_eq!(
        kubectl.ok(&["get", "crd", "gadgets.example.com", "-o", path]),
        "\"Widget\" is already in use"
    );

    // A cluster-scoped type.
    let cluster_scoped = CRD
        .replace("widgets", "dials")
        .replace("Widget", "Dial")
        .replace("widget", "dial")
        .replace("[wd]", "[dl]")
        .replace("Namespaced", "Cluster");
    kubectl.ok_with_input(&["apply", "-f", "-"], &cluster_scoped);
    kubectl.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/dials.example.com",
        "--timeout=20s",
    ]);
    let dial =
        "apiVersion: example.com/v1\nkind: Dial\nmetadata: {name: d1}\nspec: {size: large}\n";
    wait_for(WAIT, "dials to be served", || {
        kubectl
            .run_with_input(&["apply", "-f", "-"], dial)
            .status
            .success()
            .then_some(())
    });
    assert!(kubectl.ok(&["get", "dials"]).contains("d1"));

    // A second API server finds the CRDs in storage and serves them at once.
    let second = cluster.add_apiserver("second");
    let other = Kubectl::as_identity(
        cluster.dir.path(),
        second.port,
        &Identity::Admin,
        "kubeconfig-second",
    );
    assert!(other.ok(&["get", "widgets"]).contains("w1"));
    assert!(other
        .ok(&["get", "dials", "d1", "-o", "name"])
        .contains("dial.example.com/d1"));
    let discovery = other.ok(&["api-resources", "--api-group=example.com"]);
    assert!(
        discovery.contains("widgets") && discovery.contains("wd") && discovery.contains("Widget"),
        "{discovery}"
    );
}

/// Custom objects take part in the API server's own cleanups as built-in
/// ones do: a namespace being deleted waits for (and removes) the widgets
/// in it, and the garbage collector removes a widget whose owner (a
/// ConfigMap) is gone, and a ConfigMap whose owner is a deleted widget.
fn custom_objects_go_with_their_namespace_and_their_owner(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    create_crd(&cluster);

    kubectl.ok(&["create", "namespace", "team"]);
    let widget = |name: &str| WIDGET.replace("w1", name).replace(", bogus: true", "");
    kubectl.ok_with_input(&["-n", "team", "apply", "-f", "-"], &widget("doomed"));
    kubectl.ok(&["delete", "namespace", "team", "--wait=false"]);
    wait_for(WAIT, "the namespace and its widget to go", || {
        let gone = |what: &[&str]| {
            let out = kubectl.run(what);
            (!out.status.success() && stderr_of(&out).contains("NotFound")).then_some(())
        };
        gone(&["get", "namespace", "team"])?;
        gone(&["-n", "team", "get", "widget", "doomed"])
    });

    // A widget owned by a ConfigMap, and a ConfigMap owned by a widget.
    kubectl.ok(&["create", "configmap", "owner"]);
    let owner_uid = kubectl.ok(&[
        "get",
        "configmap",
        "owner",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let owned = widget("owned").replace(
        "labels: {tier: a}",
        &format!(
            "labels: {{tier: a}}, ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {owner_uid}}}]"
        ),
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], &owned);
    kubectl.ok_with_input(&["apply", "-f", "-"], &widget("parent"));
    let parent_uid = kubectl.ok(&["get", "widget", "parent", "-o", "jsonpath={.metadata.uid}"]);
    let child = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n  ownerReferences:\n  \
         - {{apiVersion: example.com/v1, kind: Widget, name: parent, uid: {parent_uid}}}\n"
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], &child);

    kubectl.ok(&["delete", "configmap", "owner"]);
    kubectl.ok(&["delete", "widget", "parent"]);
    wait_for(WAIT, "the dependents of deleted owners to go", || {
        let names = kubectl.ok(&["get", "widgets,configmaps", "-o", "name"]);
        let left = names
            .lines()
            .any(|n| n == "widget.example.com/owned" || n == "configmap/child");
        (!left).then_some(())
    });
}
