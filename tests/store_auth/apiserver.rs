//! The API server on a store with auth on, its identity limited the way
//! etcd's documentation and kube's operators limit it: the common name of
//! its client certificate (`--etcd-certfile`) is a user without a
//! password whose role reads and writes `/registry/` and the one key kube
//! compacts through, `compact_rev_key`. It serves, compacts, and reaches
//! nothing else.

use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Kubectl};
use capstan_tests::etcdctl::api_server_auth_steps;
use capstan_tests::poll::wait_for;

use super::members::{As, Members, ROOT, ROOT_PASSWORD};

const APISERVER: &str = "kube-apiserver-etcd-client";

/// etcdctl's steps for the API server's user and auth on, with a root
/// that logs in with a password.
fn limit_the_api_server(store: &Members) {
    for args in api_server_auth_steps(APISERVER, ROOT_PASSWORD) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        store.ok(0, As::Anonymous, &args);
    }
}

/// The version of `compact_rev_key`: how many compaction rounds ran.
fn compaction_rounds(store: &Members) -> u64 {
    let answer = store.ok(0, ROOT, &["get", "compact_rev_key", "-w", "json"]);
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    answer["kvs"][0]["version"].as_u64().unwrap_or(0)
}

#[test]
fn the_api_server_works_with_its_identity_limited_to_its_prefix() {
    let store = Members::start_tls(1, &[]);
    limit_the_api_server(&store);
    let tls = store.tls.as_ref().expect("a TLS store");
    let client = tls.client(APISERVER);
    let (ca, cert, key) = (
        tls.ca().display().to_string(),
        client.cert_file.display().to_string(),
        client.key_file.display().to_string(),
    );
    let flags = [
        "--etcd-cafile",
        &ca,
        "--etcd-certfile",
        &cert,
        "--etcd-keyfile",
        &key,
        "--etcd-compaction-interval",
        "1s",
    ];
    let dir = store.dir.path();
    let api = ApiServer::start_with(&[store.url(0)], dir, "apiserver", &flags);
    let kubectl = Kubectl::new(dir, api.port);
    kubectl.ok(&["create", "configmap", "limited", "--from-literal=k=v"]);
    let value = kubectl.ok(&["get", "configmap", "limited", "-o", "jsonpath={.data.k}"]);
    assert_eq!(value, "v");
    let key = "/registry/configmaps/default/limited";
    let stored = store.ok(0, ROOT, &["get", key, "--keys-only"]);
    assert!(stored.contains(key), "{stored}");

    wait_for(Duration::from_secs(60), "two compaction rounds", || {
        (compaction_rounds(&store) >= 2).then_some(())
    });
    let log = api.log_text();
    assert!(!log.contains("compaction failed"), "{log}");

    let err = store.refused(0, As::Certificate(APISERVER), &["put", "/other", "x"]);
    assert!(err.contains("etcdserver: permission denied"), "{err}");
}
