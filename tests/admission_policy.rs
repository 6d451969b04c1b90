//! PodSecurity and ValidatingAdmissionPolicy, driven with kubectl over
//! HTTPS: a namespace labelled enforce=restricted refusing a privileged
//! pod with kube's message and taking a compliant one, warn=baseline
//! letting a hostNetwork pod in with the Warning on kubectl's stderr, a
//! policy bound with Deny refusing a Deployment of 6 replicas and, bound
//! with Warn, letting it through with a warning; a policy whose CEL does
//! not compile refused at create.

use std::process::Output;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::audit_log;
use capstan_tests::poll::wait_for;

const WAIT: Duration = Duration::from_secs(30);

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Waits until a server-side dry run of `yaml` answers as `wanted` says
/// (the plugins read namespaces, policies and bindings from the watch
/// caches, which follow a write a moment later); its stderr.
fn dry_run_until(
    kubectl: &Kubectl,
    yaml: &str,
    what: &str,
    wanted: impl Fn(&Output) -> bool,
) -> String {
    wait_for(WAIT, what, || {
        let out = kubectl.run_with_input(&["apply", "--dry-run=server", "-f", "-"], yaml);
        wanted(&out).then(|| stderr(&out))
    })
}

const PRIVILEGED_POD: &str =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: priv, namespace: locked}\n\
spec:\n  containers:\n  - name: c\n    image: nginx\n    securityContext: {privileged: true}\n";

const COMPLIANT_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: hardened, namespace: locked}\n\
spec:\n  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - name: c\n    image: nginx\n    \
securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}\n";

const HOST_NETWORK_POD: &str =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: host, namespace: watched}\n\
spec:\n  hostNetwork: true\n  containers:\n  - name: c\n    image: nginx\n";

#[test]
fn pod_security_enforces_and_warns_by_namespace_labels() {
    let cluster = ApiCluster::start_with(Backend::Capstan, |dir| {
        audit_log::flags_recording(dir, "pods")
    });
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "locked"]);
    kubectl.ok(&[
        "label",
        "namespace",
        "locked",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    let refused = dry_run_until(
        kubectl,
        PRIVILEGED_POD,
        "enforce=restricted to refuse",
        |o| !o.status.success(),
    );
    let violations = "pods \"priv\" is forbidden: violates PodSecurity \"restricted:latest\": \
        privileged (container \"c\" must not set securityContext.privileged=true), \
        allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
        unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
        runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
        seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";
    assert!(refused.contains(violations), "{refused}");
    let out = kubectl.run_with_input(&["apply", "-f", "-"], PRIVILEGED_POD);
    assert!(
        !out.status.success() && stderr(&out).contains(violations),
        "{}",
        stderr(&out)
    );
    assert!(kubectl
        .fails(&["get", "pod", "priv", "-n", "locked"])
        .contains("NotFound"));
    kubectl.ok_with_input(&["apply", "-f", "-"], COMPLIANT_POD);
    kubectl.ok(&["get", "pod", "hardened", "-n", "locked"]);
    let event = audit_log::create_event(cluster.dir.path(), "hardened");
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/enforce-policy"], "restricted:latest",
        "{event}"
    );

    kubectl.ok(&["create", "namespace", "watched"]);
    kubectl.ok(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/warn=baseline",
    ]);
    let warning = "Warning: would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)";
    dry_run_until(kubectl, HOST_NETWORK_POD, "warn=baseline to warn", |o| {
        stderr(o).contains(warning)
    });
    let out = kubectl.run_with_input(&["apply", "-f", "-"], HOST_NETWORK_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    kubectl.ok(&["get", "pod", "host", "-n", "watched"]);
    // Enforcing baseline now warns about the pod already there.
    let out = kubectl.run(&[
        "label",
        "namespace",
        "watched",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("Warning: existing pods in namespace \"watched\" violate the new PodSecurity enforce level \"baseline:latest\""), "{said}");
    assert!(said.contains("Warning: host: host namespaces"), "{said}");
    // A label that does not parse is refused, and nothing changes.
    let bad = kubectl.fails(&[
        "label",
        "namespace",
        "watched",
        "--overwrite",
        "pod-security.kubernetes.io/warn=strict",
    ]);
    assert!(
        bad.contains("Invalid value: \"strict\": must be one of privileged, baseline, restricted"),
        "{bad}"
    );
    let labels = kubectl.ok(&[
        "get",
        "namespace",
        "watched",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        labels.contains("\"pod-security.kubernetes.io/warn\":\"baseline\""),
        "{labels}"
    );

    // audit=baseline records the violation in the audit event (pods made
    // before the label reaches the watch cache carry none: try again).
    kubectl.ok(&["create", "namespace", "recorded"]);
    kubectl.ok(&[
        "label",
        "namespace",
        "recorded",
        "pod-security.kubernetes.io/audit=baseline",
    ]);
    wait_for(
        WAIT,
        "an audited pod's event to carry its violation",
        || {
            let name = format!("audited-{}", rand::random::<u32>());
            let pod = HOST_NETWORK_POD
                .replace("name: host,", &format!("name: {name},"))
                .replace("namespace: watched", "namespace: recorded");
            kubectl.ok_with_input(&["apply", "-f", "-"], &pod);
            let event = audit_log::create_event(cluster.dir.path(), &name);
            let noted = &event["annotations"]["pod-security.kubernetes.io/audit-violations"];
            (noted == "would violate PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)").then_some(())
        },
    );
}

const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
metadata: {name: max-replicas}\nspec:\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [apps]\n      apiVersions: [v1]\n      \
operations: [CREATE, UPDATE]\n      resources: [deployments]\n  validations:\n  - expression: object.spec.replicas <= 5\n";

fn binding(actions: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
metadata: {{name: max-replicas-binding}}\nspec:\n  policyName: max-replicas\n  validationActions: [{actions}]\n"
    )
}

fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  replicas: {replicas}\n  \
selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: c, image: nginx}}\n"
    )
}

#[test]
fn a_validating_admission_policy_denies_or_warns_as_bound() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], POLICY);
    kubectl.ok_with_input(&["apply", "-f", "-"], &binding("Deny"));
    let denial = "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-binding' denied request: \
        failed expression: object.spec.replicas <= 5";
    let six = deployment("six", 6);
    let refused = dry_run_until(kubectl, &six, "the Deny binding to refuse", |o| {
        !o.status.success()
    });
    assert!(refused.contains(denial), "{refused}");
    let out = kubectl.run_with_input(&["apply", "-f", "-"], &six);
    assert!(!out.status.success(), "six replicas were let in");
    assert!(
        stderr(&out).contains(&format!("The deployments \"six\" is invalid: : {denial}")),
        "{}",
        stderr(&out)
    );
    assert!(kubectl
        .fails(&["get", "deployment", "six"])
        .contains("NotFound"));
    kubectl.ok_with_input(&["apply", "-f", "-"], &deployment("five", 5));

    kubectl.ok_with_input(&["apply", "-f", "-"], &binding("Warn"));
    let warning =
        "Warning: Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding \
        'max-replicas-binding': failed expression: object.spec.replicas <= 5";
    dry_run_until(kubectl, &six, "the Warn binding to warn", |o| {
        o.status.success() && stderr(o).contains(warning)
    });
    let out = kubectl.run_with_input(&["apply", "-f", "-"], &six);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    assert_eq!(
        kubectl.ok(&[
            "get",
            "deployment",
            "six",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "6"
    );
}

#[test]
fn a_policy_whose_cel_does_not_compile_is_refused() {
    let cluster = ApiCluster::start_on(Backend::Capstan);
    let kubectl = &cluster.kubectl;
    let broken = POLICY
        .replace("name: max-replicas", "name: broken")
        .replace("object.spec.replicas <= 5", "object.spec.replicas <=");
    let out = kubectl.run_with_input(&["apply", "-f", "-"], &broken);
    assert!(!out.status.success(), "a broken policy was stored");
    let said = stderr(&out);
    assert!(
        said.contains("spec.validations[0].expression: Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"),
        "{said}"
    );
    let listed = kubectl.ok(&["get", "validatingadmissionpolicies", "-o", "name"]);
    assert!(!listed.contains("broken"), "{listed}");
}

/// `--admission-control-config-file` with a PodSecurityConfiguration:
/// restricted for namespaces without labels, one namespace and one
/// runtime class exempt.
fn pod_security_configured(dir: &std::path::Path) -> Vec<String> {
    let file = dir.join("admission.yaml");
    let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n\
- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    \
kind: PodSecurityConfiguration\n    defaults: {enforce: restricted}\n    \
exemptions: {namespaces: [exempted], runtimeClasses: [kata]}\n";
    std::fs::write(&file, text).expect("write the admission configuration");
    let mut flags = audit_log::flags_recording(dir, "pods");
    flags.extend([
        "--admission-control-config-file".to_string(),
        file.display().to_string(),
    ]);
    flags
}

#[test]
fn a_pod_security_configuration_sets_defaults_and_exemptions() {
    let cluster = ApiCluster::start_with(Backend::Capstan, pod_security_configured);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "locked"]);
    kubectl.ok(&["create", "namespace", "exempted"]);
    // No labels: the configured default (restricted) is enforced.
    let refused = dry_run_until(kubectl, PRIVILEGED_POD, "the default to refuse", |o| {
        !o.status.success()
    });
    assert!(
        refused.contains(
            "pods \"priv\" is forbidden: violates PodSecurity \"restricted:latest\": privileged"
        ),
        "{refused}"
    );
    // A label still wins over the default.
    kubectl.ok(&["create", "namespace", "open"]);
    kubectl.ok(&[
        "label",
        "namespace",
        "open",
        "pod-security.kubernetes.io/enforce=privileged",
    ]);
    let open = PRIVILEGED_POD.replace("namespace: locked", "namespace: open");
    dry_run_until(kubectl, &open, "the label to let it in", |o| {
        o.status.success()
    });
    // The exempt namespace and runtime class are not checked, and the
    // audit event says why.
    let exempted = PRIVILEGED_POD
        .replace("name: priv,", "name: spared,")
        .replace("namespace: locked", "namespace: exempted");
    kubectl.ok_with_input(&["apply", "-f", "-"], &exempted);
    let event = audit_log::create_event(cluster.dir.path(), "spared");
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/exempt"], "namespace",
        "{event}"
    );
    let kata = PRIVILEGED_POD
        .replace("name: priv,", "name: kata,")
        .replace("spec:\n", "spec:\n  runtimeClassName: kata\n");
    kubectl.ok_with_input(&["apply", "-f", "-"], &kata);
    let event = audit_log::create_event(cluster.dir.path(), "kata");
    assert_eq!(
        event["annotations"]["pod-security.kubernetes.io/exempt"], "runtimeClass",
        "{event}"
    );
    assert!(kubectl
        .fails(&["get", "pod", "priv", "-n", "locked"])
        .contains("NotFound"));
}
