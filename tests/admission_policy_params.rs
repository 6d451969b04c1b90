//! ValidatingAdmissionPolicy with parameters and the CEL authorizer,
//! driven with kubectl over HTTPS: a policy whose `paramKind` is
//! ConfigMap, bound with a `paramRef` by name (Deny when the ConfigMap is
//! gone) and by label selector (every selected ConfigMap applied, none
//! found allowed); a binding's paramRef refused with kube's causes; a
//! validation that asks RBAC through `authorizer` whether the requester
//! may delete deployments; and a refused request still carrying the
//! Warning another binding added (kubectl prints it before the error).

use std::process::Output;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::poll::wait_for;

const WAIT: Duration = Duration::from_secs(30);

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Server-side dry runs of `yaml` (with `extra` arguments) until one
/// answers as `wanted` says: policies, bindings and parameters reach
/// admission through the watch caches a moment after they are written.
fn dry_run_until(
    kubectl: &Kubectl,
    extra: &[&str],
    yaml: &str,
    what: &str,
    wanted: impl Fn(&Output) -> bool,
) -> String {
    let mut args = vec!["create", "--dry-run=server", "-f", "-"];
    args.extend_from_slice(extra);
    wait_for(WAIT, what, || {
        let out = kubectl.run_with_input(&args, yaml);
        wanted(&out).then(|| stderr(&out))
    })
}

fn refused_with(text: &str) -> impl Fn(&Output) -> bool + '_ {
    move |o| !o.status.success() && stderr(o).contains(text)
}

fn accepted(o: &Output) -> bool {
    o.status.success()
}

fn deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: default}}\nspec:\n  \
replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    \
spec:\n      containers:\n      - {{name: c, image: nginx}}\n"
    )
}

const PARAM_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
metadata: {name: replica-limit}\nspec:\n  paramKind: {apiVersion: v1, kind: ConfigMap}\n  matchConstraints:\n    \
resourceRules:\n    - apiGroups: [apps]\n      apiVersions: [v1]\n      operations: [CREATE, UPDATE]\n      \
resources: [deployments]\n  validations:\n  - expression: object.spec.replicas <= int(params.data.max)\n    \
messageExpression: \"'at most ' + params.data.max + ' replicas (' + params.metadata.name + ')'\"\n";

fn binding(param_ref: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
metadata: {{name: replica-limit}}\nspec:\n  policyName: replica-limit\n  validationActions: [Deny]\n  \
paramRef: {param_ref}\n"
    )
}

fn limit(name: &str, max: u32, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default, labels: {{{labels}}}}}\n\
data: {{max: \"{max}\"}}\n"
    )
}

const DENIED: &str =
    "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request:";

#[test]
fn params_come_from_config_maps_by_name_or_selector() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], &limit("small", 3, ""));
    kubectl.ok_with_input(&["apply", "-f", "-"], PARAM_POLICY);
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &binding("{name: small, parameterNotFoundAction: Deny}"),
    );
    let by_name = format!("{DENIED} at most 3 replicas (small)");
    let said = dry_run_until(kubectl, &[], &deployment(4), "the named limit", |o| {
        refused_with(&by_name)(o)
    });
    assert!(
        said.contains("The deployments \"web\" is invalid"),
        "{said}"
    );
    kubectl.ok_with_input(&["create", "--dry-run=server", "-f", "-"], &deployment(3));

    // The named ConfigMap gone: parameterNotFoundAction Deny refuses.
    kubectl.ok(&["delete", "configmap", "small"]);
    let missing = format!(
        "{DENIED} failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    dry_run_until(kubectl, &[], &deployment(1), "Deny without params", |o| {
        refused_with(&missing)(o)
    });

    // By selector, Allow: nothing selected lets anything in; then every
    // selected ConfigMap must agree.
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &binding("{selector: {matchLabels: {limits: replicas}}, parameterNotFoundAction: Allow}"),
    );
    dry_run_until(
        kubectl,
        &[],
        &deployment(9),
        "Allow without params",
        accepted,
    );
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &limit("loose", 8, "limits: replicas"),
    );
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &limit("strict", 5, "limits: replicas"),
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], &limit("unlabelled", 1, ""));
    let strict = format!("{DENIED} at most 5 replicas (strict)");
    dry_run_until(kubectl, &[], &deployment(6), "the selected limits", |o| {
        refused_with(&strict)(o)
    });
    kubectl.ok_with_input(&["create", "-f", "-"], &deployment(5));
    assert_eq!(
        kubectl.ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "5"
    );

    // A paramRef kube would refuse is refused with kube's causes, and
    // the stored binding is unchanged.
    let bad = binding("{name: strict, selector: {matchLabels: {a: b}}}");
    let out = kubectl.run_with_input(&["apply", "-f", "-"], &bad);
    assert!(!out.status.success(), "a bad paramRef was stored");
    let said = stderr(&out);
    for cause in [
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.parameterNotFoundAction: Required value",
    ] {
        assert!(said.contains(cause), "{cause} missing from {said}");
    }
    let stored = kubectl.ok(&[
        "get",
        "validatingadmissionpolicybinding",
        "replica-limit",
        "-o",
        "jsonpath={.spec.paramRef}",
    ]);
    assert!(
        stored.contains("\"parameterNotFoundAction\":\"Allow\""),
        "{stored}"
    );
}

const AUTHZ_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
metadata: {name: deleters-scale}\nspec:\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [apps]\n      \
apiVersions: [v1]\n      operations: [CREATE]\n      resources: [deployments]\n  validations:\n  - expression: >-\n      \
object.spec.replicas <= 1 || authorizer.group('apps').resource('deployments')\n      \
.namespace(object.metadata.namespace).check('delete').allowed()\n    \
message: only users who may delete deployments may ask for more than one replica\n    reason: Forbidden\n";

const WARN_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
metadata: {name: few-replicas}\nspec:\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [apps]\n      \
apiVersions: [v1]\n      operations: [CREATE]\n      resources: [deployments]\n  validations:\n  \
- expression: object.spec.replicas <= 2\n    message: more than two replicas\n";

fn plain_binding(name: &str, actions: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
metadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  validationActions: [{actions}]\n"
    )
}

#[test]
fn the_authorizer_asks_rbac_and_refusals_keep_their_warnings() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&[
        "create",
        "role",
        "creator",
        "--verb=create,get",
        "--resource=deployments",
    ]);
    kubectl.ok(&[
        "create",
        "rolebinding",
        "alice",
        "--role=creator",
        "--user=alice",
    ]);
    kubectl.ok_with_input(&["apply", "-f", "-"], AUTHZ_POLICY);
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &plain_binding("deleters-scale", "Deny"),
    );
    let as_alice = ["--as", "alice"];
    let denial = "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'deleters-scale' \
        with binding 'deleters-scale' denied request: only users who may delete deployments may ask \
        for more than one replica";
    dry_run_until(kubectl, &as_alice, &deployment(3), "alice refused", |o| {
        refused_with(denial)(o)
    });
    kubectl.ok_with_input(
        &["create", "--dry-run=server", "--as", "alice", "-f", "-"],
        &deployment(1),
    );
    // RBAC lets alice delete: the same request goes through.
    kubectl.ok(&[
        "create",
        "role",
        "deleter",
        "--verb=delete",
        "--resource=deployments",
    ]);
    kubectl.ok(&[
        "create",
        "rolebinding",
        "alice-deletes",
        "--role=deleter",
        "--user=alice",
    ]);
    dry_run_until(
        kubectl,
        &as_alice,
        &deployment(3),
        "alice allowed",
        accepted,
    );

    // A Warn binding's warning reaches the client with another binding's
    // 403 (bob may not delete).
    kubectl.ok(&[
        "create",
        "rolebinding",
        "bob",
        "--role=creator",
        "--user=bob",
    ]);
    kubectl.ok_with_input(&["apply", "-f", "-"], WARN_POLICY);
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &plain_binding("few-replicas", "Warn"),
    );
    let warning =
        "Warning: Validation failed for ValidatingAdmissionPolicy 'few-replicas' with binding \
        'few-replicas': more than two replicas";
    let said = dry_run_until(
        kubectl,
        &["--as", "bob"],
        &deployment(3),
        "a warned 403",
        |o| refused_with(denial)(o) && stderr(o).contains(warning),
    );
    let (warned_at, denied_at) = (said.find(warning), said.find("Error from server"));
    assert!(
        warned_at < denied_at,
        "the warning comes with the answer: {said}"
    );
    // So do the decoder's warnings about unknown fields.
    let unknown = deployment(3).replace("  replicas: 3\n", "  replicas: 3\n  bogus: 1\n");
    let out = kubectl.run_with_input(
        &[
            "create",
            "--dry-run=server",
            "--validate=warn",
            "--as",
            "bob",
            "-f",
            "-",
        ],
        &unknown,
    );
    assert!(refused_with(denial)(&out), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("Warning: unknown field \"spec.bogus\""),
        "{said}"
    );
    assert!(kubectl
        .fails(&["get", "deployment", "web"])
        .contains("NotFound"));
}

const LIMITS_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
metadata: {name: replicalimits.ops.example.com}\nspec:\n  group: ops.example.com\n  scope: Namespaced\n  \
names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}\n  versions:\n  - name: v1\n    \
served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          \
spec:\n            type: object\n            properties:\n              max: {type: integer}\n";

#[test]
fn params_can_be_custom_resources() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], LIMITS_CRD);
    wait_for(WAIT, "replicalimits to be served", || {
        let out = kubectl.run(&["get", "replicalimits"]);
        out.status.success().then_some(())
    });
    let limit = "apiVersion: ops.example.com/v1\nkind: ReplicaLimit\n\
        metadata: {name: house-rule, namespace: default}\nspec: {max: 2}\n";
    kubectl.ok_with_input(&["apply", "-f", "-"], limit);
    let policy = PARAM_POLICY
        .replace(
            "paramKind: {apiVersion: v1, kind: ConfigMap}",
            "paramKind: {apiVersion: ops.example.com/v1, kind: ReplicaLimit}",
        )
        .replace("int(params.data.max)", "params.spec.max")
        .replace("params.data.max", "string(params.spec.max)");
    kubectl.ok_with_input(&["apply", "-f", "-"], &policy);
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &binding("{name: house-rule, namespace: default, parameterNotFoundAction: Deny}"),
    );
    let denial = format!("{DENIED} at most 2 replicas (house-rule)");
    dry_run_until(kubectl, &[], &deployment(3), "the custom limit", |o| {
        refused_with(&denial)(o)
    });
    kubectl.ok_with_input(&["create", "--dry-run=server", "-f", "-"], &deployment(2));
}
