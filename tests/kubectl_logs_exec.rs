//! `kubectl logs`, `kubectl exec` and `kubectl attach` through the API
//! server to the simulated nodes' kubelet API, on the embedded `capstan`
//! (one simulated node): the API server finds the pod's node, reaches its
//! kubelet with its kubelet client certificate, streams a log (`--tail`,
//! `-c`, `--previous`, `-f`) and relays an exec's websocket (output,
//! stdin, exit codes). Authorization is the API server's (`create
//! pods/exec`), admission sees exec as a CONNECT a policy can refuse, and
//! a pod whose node is stopped, or that has no node, fails as kube fails.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::free_port;
use capstan_tests::kubectl::Lines;
use capstan_tests::poll::wait_for;

const WAIT: Duration = Duration::from_secs(60);
const NODE: &str = "capstan-simulated-0";

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: nginx, env: [{name: GREETING, value: hello}]}
  - {name: side, image: busybox}
---
apiVersion: v1
kind: Pod
metadata: {name: nowhere}
spec:
  nodeSelector: {no-such-label: "true"}
  containers: [{name: app, image: nginx}]
"#;

fn start() -> (Embedded, u16) {
    let admin_port = free_port();
    let capstan = Embedded::start_with(&[
        "--simulated-nodes",
        "1",
        "--simulated-nodes-healthz-port",
        &admin_port.to_string(),
    ]);
    capstan.kubectl.wait_ready_nodes(1, WAIT);
    capstan.kubectl.ok_with_input(&["apply", "-f", "-"], PODS);
    capstan
        .kubectl
        .ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    (capstan, admin_port)
}

#[test]
fn logs_and_exec_reach_the_simulated_kubelet() {
    let (capstan, admin_port) = start();
    let kubectl = &capstan.kubectl;
    logs(kubectl);
    follow(kubectl);
    exec(kubectl);
    not_placed(kubectl);
    refused_by_authorization(kubectl);
    refused_by_admission(kubectl);
    node_stopped(kubectl, admin_port);
}

fn logs(kubectl: &Kubectl) {
    let log = kubectl.ok(&["logs", "web", "-c", "app"]);
    assert!(
        log.contains(
            "container app (docker.io/library/nginx:latest) started on node capstan-simulated-0"
        ),
        "{log}"
    );
    let side = kubectl.ok(&["logs", "web", "-c", "side", "--tail", "1"]);
    assert_eq!(side.lines().count(), 1, "{side}");
    assert!(side.contains("container side"), "{side}");
    let stamped = kubectl.ok(&["logs", "web", "-c", "app", "--timestamps"]);
    assert!(stamped.starts_with("20"), "{stamped}");
    // Two containers and none named: kubectl picks the first.
    let defaulted = kubectl.ok(&["logs", "web"]);
    assert!(defaulted.contains("container app"), "{defaulted}");
    let previous = kubectl.fails(&["logs", "web", "-c", "app", "--previous"]);
    assert!(
        previous.contains("previous terminated container \"app\" in pod \"web\" not found"),
        "{previous}"
    );
    // kubectl checks these itself; the API server checks them too.
    let raw = "/api/v1/namespaces/default/pods/web/log?container=app&tailLines=-2&limitBytes=0";
    let negative = kubectl.fails(&["get", "--raw", raw]);
    for message in [
        "PodLogOptions \"web\" is invalid",
        "tailLines: Invalid value: -2: must be greater than or equal to 0",
        "limitBytes: Invalid value: 0: must be greater than 0",
    ] {
        assert!(negative.contains(message), "{negative}");
    }
    let stranger = kubectl.fails(&["logs", "web", "-c", "db"]);
    assert!(
        stranger.contains("container db is not valid for pod web"),
        "{stranger}"
    );
}

/// `-f` streams as the kubelet writes: the first line arrives while the
/// stream stays open.
fn follow(kubectl: &Kubectl) {
    let mut child = kubectl
        .command(&["logs", "-f", "web", "-c", "app"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run kubectl logs -f");
    let lines = Lines::of(child.stdout.take().expect("piped"));
    let first = lines.next(Duration::from_secs(20), "the first line of a followed log");
    assert!(
        first.contains("container app (docker.io/library/nginx:latest) started"),
        "{first}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let ended = child.try_wait().expect("kubectl's state");
    let _ = child.kill();
    let _ = child.wait();
    assert!(ended.is_none(), "a followed log ended by itself: {ended:?}");
}

fn exec(kubectl: &Kubectl) {
    let hi = kubectl.ok(&["exec", "web", "-c", "app", "--", "echo", "hi"]);
    assert_eq!(hi, "hi\n");
    let host = kubectl.ok(&["exec", "web", "-c", "app", "--", "hostname"]);
    assert_eq!(host.trim(), "web");
    let env = kubectl.ok(&["exec", "web", "-c", "app", "--", "printenv", "GREETING"]);
    assert_eq!(env.trim(), "hello");
    let exited = kubectl.run(&["exec", "web", "-c", "app", "--", "sh", "-c", "exit 3"]);
    assert_eq!(exited.status.code(), Some(3), "{exited:?}");
    let failed = kubectl.run(&["exec", "web", "-c", "app", "--", "false"]);
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    let missing = kubectl.run(&["exec", "web", "-c", "app", "--", "no-such-tool"]);
    assert!(!missing.status.success(), "{missing:?}");
    let mut child = kubectl
        .command(&["exec", "-i", "web", "-c", "app", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl exec -i");
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(b"line one\nline two\n")
        .expect("write stdin");
    drop(stdin);
    let output = child.wait_with_output().expect("kubectl exec -i");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "line one\nline two\n"
    );
    let attach = kubectl.fails(&["attach", "web", "-c", "app"]);
    assert!(attach.contains("attach is not simulated"), "{attach}");
}

/// A pod no node has taken: its log is empty, as kube answers it; exec
/// is kube's 400.
fn not_placed(kubectl: &Kubectl) {
    assert_eq!(kubectl.ok(&["logs", "nowhere"]), "");
    let exec = kubectl.fails(&["exec", "nowhere", "--", "ls"]);
    assert!(
        exec.contains("pod nowhere does not have a host assigned"),
        "{exec}"
    );
    let missing = kubectl.fails(&["exec", "nobody", "--", "ls"]);
    assert!(missing.contains("pods \"nobody\" not found"), "{missing}");
}

/// A user who may get pods/exec but not create it runs nothing: the API
/// server refuses (403), whatever the kubelet would allow.
fn refused_by_authorization(kubectl: &Kubectl) {
    kubectl.ok(&[
        "create",
        "role",
        "peek",
        "--verb=get,list",
        "--resource=pods,pods/exec,pods/log",
    ]);
    kubectl.ok(&[
        "create",
        "rolebinding",
        "peek",
        "--role=peek",
        "--user=viewer",
    ]);
    let as_viewer = |args: &[&str]| {
        let mut all = vec!["--as=viewer"];
        all.extend_from_slice(args);
        all.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let args = as_viewer(&["logs", "web", "-c", "app", "--tail=1"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(kubectl.ok(&args).contains("container app"));
    let args = as_viewer(&["exec", "web", "-c", "app", "--", "echo", "hi"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let refused = kubectl.fails(&args);
    assert!(
        refused.contains("Forbidden") && refused.contains("cannot create resource \"pods/exec\""),
        "{refused}"
    );
}

/// A ValidatingAdmissionPolicy matching CONNECT on pods/exec refuses it.
fn refused_by_admission(kubectl: &Kubectl) {
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-exec}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}
  validations:
  - expression: "object.command[0] != 'hostname'"
    message: "hostname may not be run here"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-exec}
spec: {policyName: no-exec, validationActions: [Deny]}
"#,
    );
    let refused = wait_for(WAIT, "the policy to refuse an exec", || {
        let output = kubectl.run(&["exec", "web", "-c", "app", "--", "hostname"]);
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        (!output.status.success()).then_some(stderr)
    });
    assert!(
        refused.contains("hostname may not be run here"),
        "{refused}"
    );
    // Other commands pass: the policy saw the PodExecOptions.
    let hi = kubectl.ok(&["exec", "web", "-c", "app", "--", "echo", "hi"]);
    assert_eq!(hi, "hi\n");
    kubectl.ok(&["delete", "validatingadmissionpolicybinding", "no-exec"]);
}

/// A stopped node's kubelet does not serve the pod: an error, not a hang.
fn node_stopped(kubectl: &Kubectl, admin_port: u16) {
    let admin = |action: &str| {
        let url = format!("http://127.0.0.1:{admin_port}/nodes/{NODE}/{action}");
        let status = Command::new("curl")
            .args(["-sf", "-X", "POST", &url])
            .stdout(Stdio::null())
            .status()
            .expect("run curl");
        assert!(status.success(), "POST {url}");
    };
    admin("stop");
    let log = kubectl.fails(&["logs", "web", "-c", "app", "--request-timeout=20s"]);
    assert!(log.contains("is stopped"), "{log}");
    let exec = kubectl.fails(&[
        "exec",
        "web",
        "-c",
        "app",
        "--request-timeout=20s",
        "--",
        "ls",
    ]);
    assert!(exec.contains("is stopped"), "{exec}");
    admin("start");
}
