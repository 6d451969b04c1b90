//! The official Python client (`pip install kubernetes`) against
//! `capstan-apiserver` over HTTPS with RBAC: from a kubeconfig holding a
//! bearer token, and from one holding a client certificate, it says who
//! it is, creates and lists ConfigMaps where a RoleBinding lets it, and
//! gets a 403 elsewhere.
//!
//! The client is installed into a virtualenv under `target/py-kubernetes`
//! (made once, reused by later runs). If it cannot be installed (PyPI
//! unreachable), the test fails saying so.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Backend, Kubectl, StoreBackend};
use capstan_tests::http::Connection;
use capstan_tests::poll::wait_for;
use capstan_tests::python::python_with_kubernetes;
use capstan_tests::tls::{self, Identity};
use serde_json::Value;
use time::OffsetDateTime;

const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config

kubeconfig, name = sys.argv[1], sys.argv[2]
api_client = config.new_client_from_config(config_file=kubeconfig)
core = client.CoreV1Api(api_client)
review = client.AuthenticationV1Api(api_client).create_self_subject_review(
    client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"))
created = core.create_namespaced_config_map(
    "default",
    client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"from": "python"}))
listed = core.list_namespaced_config_map("default")
try:
    core.list_namespaced_config_map("kube-system")
    elsewhere = 200
except client.exceptions.ApiException as e:
    elsewhere = e.status
print(json.dumps({
    "user": review.status.user_info.username,
    "groups": review.status.user_info.groups,
    "created": created.metadata.name,
    "uid": created.metadata.uid,
    "listed": [c.metadata.name for c in listed.items],
    "elsewhere": elsewhere,
}))
"#;

fn run_python(python: &Path, dir: &Path, kubeconfig: &str, name: &str) -> Value {
    let config = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&config, kubeconfig).expect("write a kubeconfig");
    let script = dir.join("client.py");
    std::fs::write(&script, SCRIPT).expect("write the script");
    let output = Command::new(python)
        .arg(&script)
        .arg(&config)
        .arg(name)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_python_client_works_with_a_token_and_a_certificate() {
    let python = python_with_kubernetes();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "py-token,py,py-uid,\"dev\"\n").expect("the token file");
    let store = StoreBackend::start(Backend::Capstan, &dir.path().join("store"));
    let flags = ["--token-auth-file", tokens.to_str().expect("UTF-8")];
    let api = ApiServer::start_with(&[store.url()], dir.path(), "apiserver", &flags);
    let port = api.port;
    let admin = Kubectl::new(dir.path(), port);
    // Group dev may edit in default only (RBAC is the default mode).
    admin.ok(&[
        "create",
        "rolebinding",
        "dev-edit",
        "--clusterrole=edit",
        "--group=dev",
        "-n",
        "default",
    ]);
    let token = Identity::Token("py-token".into());
    wait_for(Duration::from_secs(20), "the binding to reach RBAC", || {
        let mut conn = Connection::connect_as(port, &token).ok()?;
        let response = conn
            .send_json("GET", "/api/v1/namespaces/default/configmaps", None)
            .ok()?;
        (response.status == 200).then_some(())
    });
    let pki = tls::pki_of(port).expect("a TLS server");

    let answer = run_python(
        &python,
        dir.path(),
        &tls::kubeconfig(port, &pki, &token),
        "from-token",
    );
    assert_eq!(answer["user"], "py", "{answer}");
    assert!(answer["groups"].to_string().contains("dev"), "{answer}");
    assert_eq!(answer["created"], "from-token");
    assert!(
        answer["listed"].to_string().contains("from-token"),
        "{answer}"
    );
    assert_eq!(answer["elsewhere"], 403, "{answer}");

    let ca = pki.client_authority().expect("the client CA");
    let an_hour_ago = OffsetDateTime::now_utc() - time::Duration::hours(1);
    let issued = ca
        .issue_client("jane", Some("dev"), an_hour_ago, time::Duration::days(1))
        .expect("a client certificate");
    let jane = Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    };
    let answer = run_python(
        &python,
        dir.path(),
        &tls::kubeconfig(port, &pki, &jane),
        "from-cert",
    );
    assert_eq!(answer["user"], "jane", "{answer}");
    assert_eq!(answer["created"], "from-cert");
    let listed = answer["listed"].to_string();
    assert!(
        listed.contains("from-cert") && listed.contains("from-token"),
        "{answer}"
    );
    assert_eq!(answer["elsewhere"], 403, "{answer}");
    // What Python created is there for kubectl too.
    let names = admin.ok(&["get", "configmaps", "-o", "name"]);
    assert!(names.contains("configmap/from-cert"), "{names}");
}
