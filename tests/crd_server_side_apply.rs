//! Server-side apply on a custom resource follows its schema, driven by
//! `kubectl apply --server-side` as two managers: a
//! `x-kubernetes-list-type: map` list (keyed by name and protocol)
//! merged element by element, a `set` merged by value, an unmarked list
//! atomic, an `x-kubernetes-map-type: atomic` map owned whole, a plain
//! map field by field. The field names are ones the built-in types do
//! not use, so only the schema can say how they merge.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::poll::wait_for;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pools.ops.example.com}
spec:
  group: ops.example.com
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              listeners:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name, protocol]
                items:
                  type: object
                  required: [name, protocol]
                  properties:
                    name: {type: string}
                    protocol: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              args:
                type: array
                items: {type: string}
              pick:
                type: object
                x-kubernetes-map-type: atomic
                additionalProperties: {type: string}
              notes:
                type: object
                additionalProperties: {type: string}
"#;

fn pool(spec: &str) -> String {
    format!("apiVersion: ops.example.com/v1\nkind: Pool\nmetadata: {{name: p, namespace: default}}\nspec: {spec}\n")
}

fn apply(kubectl: &Kubectl, manager: &str, spec: &str) -> std::process::Output {
    let manager = format!("--field-manager={manager}");
    kubectl.run_with_input(
        &["apply", "--server-side", &manager, "-f", "-"],
        &pool(spec),
    )
}

fn applied(kubectl: &Kubectl, manager: &str, spec: &str) {
    let out = apply(kubectl, manager, spec);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{manager} could not apply {spec}: {said}"
    );
}

fn conflict(kubectl: &Kubectl, manager: &str, spec: &str) -> String {
    let out = apply(kubectl, manager, spec);
    assert!(
        !out.status.success(),
        "{manager} applied {spec} without a conflict"
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn stored(kubectl: &Kubectl) -> Value {
    let text = kubectl.ok(&["get", "pool", "p", "-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&text).expect("a Pool as JSON")
}

fn fields_of(pool: &Value, manager: &str) -> String {
    let entries = pool["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let entry = entries.iter().find(|e| e["manager"] == manager);
    entry.map(|e| e["fieldsV1"].to_string()).unwrap_or_default()
}

#[test]
fn two_managers_apply_by_the_schemas_list_and_map_types() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
    wait_for(WAIT, "pools to be served", || {
        kubectl
            .run(&["get", "pools"])
            .status
            .success()
            .then_some(())
    });
    applied(
        kubectl,
        "alpha",
        "{listeners: [{name: http, protocol: TCP, port: 80}], tags: [a], args: [one, two], \
         pick: {app: web}, notes: {owner: alpha}}",
    );
    applied(
        kubectl,
        "beta",
        "{listeners: [{name: http, protocol: UDP, port: 53}], tags: [b], notes: {extra: beta}}",
    );
    let both = stored(kubectl);
    let spec = &both["spec"];
    assert_eq!(
        spec["listeners"],
        json!([{"name": "http", "protocol": "TCP", "port": 80},
               {"name": "http", "protocol": "UDP", "port": 53}]),
        "a map list merges by its keys"
    );
    assert_eq!(spec["tags"], json!(["a", "b"]), "a set merges by value");
    assert_eq!(spec["notes"], json!({"owner": "alpha", "extra": "beta"}));
    let beta = fields_of(&both, "beta");
    assert!(
        beta.contains(r#"k:{\"name\":\"http\",\"protocol\":\"UDP\"}"#)
            && beta.contains(r#"v:\"b\""#),
        "{beta}"
    );

    // What alpha owns as a whole conflicts as a whole.
    let args = conflict(kubectl, "beta", "{args: [three]}");
    assert!(
        args.contains("conflict with \"alpha\": .spec.args"),
        "{args}"
    );
    let pick = conflict(kubectl, "beta", "{pick: {tier: x}}");
    assert!(
        pick.contains("conflict with \"alpha\": .spec.pick"),
        "{pick}"
    );
    let port = conflict(
        kubectl,
        "beta",
        "{listeners: [{name: http, protocol: TCP, port: 8080}]}",
    );
    assert!(
        port.contains(
            "conflict with \"alpha\": .spec.listeners[name=\"http\",protocol=\"TCP\"].port"
        ),
        "{port}"
    );
    assert_eq!(
        stored(kubectl)["spec"]["args"],
        json!(["one", "two"]),
        "nothing changed"
    );

    // Forced, beta takes the atomic list whole; alpha dropping its tag
    // and its listener leaves beta's.
    let forced = kubectl.run_with_input(
        &["apply", "--server-side", "--field-manager=beta", "--force-conflicts", "-f", "-"],
        &pool("{listeners: [{name: http, protocol: UDP, port: 53}], tags: [b], notes: {extra: beta}, args: [three]}"),
    );
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    applied(
        kubectl,
        "alpha",
        "{pick: {app: web}, notes: {owner: alpha}}",
    );
    let spec = stored(kubectl)["spec"].clone();
    assert_eq!(spec["args"], json!(["three"]));
    assert_eq!(spec["tags"], json!(["b"]));
    assert_eq!(
        spec["listeners"],
        json!([{"name": "http", "protocol": "UDP", "port": 53}])
    );
}
