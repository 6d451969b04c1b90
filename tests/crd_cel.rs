//! CustomResourceDefinition schemas beyond types, with kubectl 1.32:
//! `x-kubernetes-validations` CEL rules (messages, messageExpression,
//! reasons, fieldPath, transition rules on update, rules that do not
//! compile refusing the CRD), `selectableFields` for field selectors on
//! lists and watches, `kubectl explain` of a custom field, OpenAPI v2 with
//! the custom definitions, and `kubectl replace` with client validation.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Http};
use capstan_tests::http::Connection;
use capstan_tests::poll::wait_for;

const WAIT: Duration = Duration::from_secs(20);

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - {jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        description: A gizmo is a made-up thing for these tests.
        properties:
          spec:
            type: object
            description: What the gizmo should be.
            x-kubernetes-validations:
            - {rule: "self.minReplicas <= self.maxReplicas", message: "minReplicas must not exceed maxReplicas"}
            - rule: "self.color != 'black'"
              messageExpression: "'color ' + self.color + ' is not allowed'"
              reason: FieldValueForbidden
              fieldPath: .color
            properties:
              minReplicas: {type: integer}
              maxReplicas: {type: integer}
              color: {type: string, description: The colour the gizmo is painted.}
              id:
                type: string
                x-kubernetes-validations:
                - {rule: "self == oldSelf", message: "id is immutable"}
"#;

fn gizmo(name: &str, min: i64, max: i64, color: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {{name: {name}}}\n\
         spec: {{minReplicas: {min}, maxReplicas: {max}, color: {color}, id: {name}-id}}\n"
    )
}

capstan_tests::on_both_backends!(
    rules_refuse_objects_with_causes_and_guard_updates,
    selectable_fields_explain_and_openapi_v2,
);

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn create_crd(cluster: &ApiCluster) {
    cluster.kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
    let mut http = Http::connect(cluster.port);
    wait_for(WAIT, "the gizmos resource to answer", || {
        let (code, _) = http.get("/apis/example.com/v1/namespaces/default/gizmos");
        (code == 200).then_some(())
    });
}

fn rules_refuse_objects_with_causes_and_guard_updates(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;

    // A rule that does not compile refuses the CRD, with kube's cause.
    let broken = CRD.replace(
        "self.minReplicas <= self.maxReplicas",
        "self.minReplicas <=",
    );
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], &broken);
    let stderr = stderr_of(&refused);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: \
             Invalid value: apiextensions.ValidationRule{Rule:\"self.minReplicas <=\""
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("compilation failed: ERROR: <input>:1:"),
        "{stderr}"
    );
    assert!(
        kubectl
            .run(&["get", "crd", "gizmos.example.com"])
            .status
            .code()
            != Some(0)
    );

    create_crd(&cluster);
    let created = kubectl.ok_with_input(&["apply", "-f", "-"], &gizmo("g1", 1, 3, "red"));
    assert!(
        created.contains("gizmo.example.com/g1 created"),
        "{created}"
    );

    // Both rules of spec fail: one cause each, at spec and at the
    // rule's fieldPath, and nothing is stored.
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], &gizmo("g2", 5, 3, "black"));
    let stderr = stderr_of(&refused);
    assert!(!refused.status.success(), "{stderr}");
    // kubectl lists several causes one per line.
    assert!(
        stderr.contains(
            "The Gizmo \"g2\" is invalid: \n\
             * spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas\n\
             * spec.color: Forbidden: color black is not allowed\n"
        ),
        "{stderr}"
    );
    assert!(kubectl.run(&["get", "gizmo", "g2"]).status.code() != Some(0));

    // The transition rule: id may not change; other updates go through.
    let patch = |body: &str| kubectl.run(&["patch", "gizmo", "g1", "--type=merge", "-p", body]);
    let changed_id = patch(r#"{"spec":{"id":"other"}}"#);
    let stderr = stderr_of(&changed_id);
    assert!(!changed_id.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "The Gizmo \"g1\" is invalid: spec.id: Invalid value: \"string\": id is immutable"
        ),
        "{stderr}"
    );
    let recoloured = patch(r#"{"spec":{"color":"green"}}"#);
    assert!(recoloured.status.success(), "{}", stderr_of(&recoloured));
    let get = |path: &str| kubectl.ok(&["get", "gizmo", "g1", "-o", &format!("jsonpath={path}")]);
    assert_eq!(get("{.spec.id}"), "g1-id");
    assert_eq!(get("{.spec.color}"), "green");
    // An update that breaks a plain rule is refused as a create is.
    let widened = patch(r#"{"spec":{"minReplicas":9}}"#);
    assert!(
        stderr_of(&widened)
            .contains("spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas"),
        "{}",
        stderr_of(&widened)
    );
}

fn selectable_fields_explain_and_openapi_v2(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    create_crd(&cluster);
    for (name, color) in [("red-one", "red"), ("blue-one", "blue"), ("red-two", "red")] {
        kubectl.ok_with_input(&["apply", "-f", "-"], &gizmo(name, 1, 1, color));
    }

    // Field selectors on the CRD's selectable field, list and watch.
    let red = kubectl.ok(&[
        "get",
        "gizmos",
        "--field-selector",
        "spec.color=red",
        "-o",
        "name",
    ]);
    assert_eq!(
        red.lines().collect::<Vec<_>>(),
        ["gizmo.example.com/red-one", "gizmo.example.com/red-two"]
    );
    let not_red = kubectl.ok(&[
        "get",
        "gizmos",
        "--field-selector",
        "spec.color!=red",
        "-o",
        "name",
    ]);
    assert_eq!(not_red.trim(), "gizmo.example.com/blue-one");
    let unknown = kubectl.run(&["get", "gizmos", "--field-selector", "spec.minReplicas=1"]);
    assert!(
        stderr_of(&unknown).contains("field label not supported: spec.minReplicas"),
        "{}",
        stderr_of(&unknown)
    );
    let watch = kubectl.spawn(&[
        "get",
        "gizmos",
        "-w",
        "--field-selector",
        "spec.color=blue",
        "-o",
        "name",
    ]);
    let lines = &watch.lines;
    assert_eq!(
        lines.next(WAIT, "the blue gizmo"),
        "gizmo.example.com/blue-one"
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], &gizmo("red-three", 1, 1, "red"));
    kubectl.ok_with_input(&["apply", "-f", "-"], &gizmo("blue-two", 1, 1, "blue"));
    // The red one made in between is not seen: the next line is blue.
    assert_eq!(
        lines.next(WAIT, "the new blue gizmo"),
        "gizmo.example.com/blue-two"
    );
    drop(watch);

    // kubectl explain reads the custom schema's descriptions (OpenAPI v3).
    let explained = kubectl.ok(&["explain", "gizmos.spec.color"]);
    assert!(explained.contains("KIND:       Gizmo"), "{explained}");
    assert!(
        explained.contains("The colour the gizmo is painted."),
        "{explained}"
    );
    let explained = kubectl.ok(&["explain", "gizmos.spec"]);
    assert!(
        explained.contains("What the gizmo should be."),
        "{explained}"
    );

    // OpenAPI v2 carries the custom definition, with its kind.
    let v2 = kubectl.ok(&["get", "--raw", "/openapi/v2"]);
    let v2: serde_json::Value = serde_json::from_str(&v2).unwrap();
    assert_eq!(v2["swagger"], "2.0");
    let definitions = v2["definitions"].as_object().unwrap();
    let gizmo_definition = definitions
        .values()
        .find(|d| d["x-kubernetes-group-version-kind"][0]["kind"] == "Gizmo")
        .expect("a definition for Gizmo");
    assert_eq!(
        gizmo_definition["properties"]["spec"]["properties"]["color"]["description"],
        "The colour the gizmo is painted."
    );
    assert!(definitions
        .values()
        .any(|d| d["x-kubernetes-group-version-kind"][0]["kind"] == "ConfigMap"));
    assert!(v2["paths"]["/apis/example.com/v1/namespaces/{namespace}/gizmos/{name}"].is_object());

    // kubectl replace with client validation on (no --validate=false).
    let replaced = kubectl.ok_with_input(&["replace", "-f", "-"], &gizmo("red-one", 2, 4, "red"));
    assert!(
        replaced.contains("gizmo.example.com/red-one replaced"),
        "{replaced}"
    );
    let min = kubectl.ok(&[
        "get",
        "gizmo",
        "red-one",
        "-o",
        "jsonpath={.spec.minReplicas}",
    ]);
    assert_eq!(min, "2");

    // A `kind: List` makes kubectl read /openapi/v2 as protobuf (gnostic's
    // messages) to find each item's schema.
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n\
         - apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: listed}}\n  data: {{k: v}}\n\
         - {}\n",
        gizmo("listed", 1, 2, "blue")
            .trim_end()
            .replace('\n', "\n  ")
    );
    let applied = kubectl.ok_with_input(&["apply", "-f", "-"], &list);
    assert!(applied.contains("configmap/listed created"), "{applied}");
    assert!(
        applied.contains("gizmo.example.com/listed created"),
        "{applied}"
    );
    let mut connection = Connection::connect(cluster.port).unwrap();
    let accept = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let response = connection
        .send("GET", "/openapi/v2", &[("Accept", accept)], b"")
        .unwrap();
    assert_eq!(response.status, 200);
    assert!(
        response
            .body
            .windows(b"io.k8s.api.core.v1.ConfigMap".len())
            .any(|w| w == b"io.k8s.api.core.v1.ConfigMap"),
        "the protobuf document names the ConfigMap definition"
    );
}
