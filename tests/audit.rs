//! The audit log as an operator reads it: `capstan-apiserver
//! --audit-policy-file P --audit-log-path L` over HTTPS, driven by kubectl
//! (as the admin, impersonating) and a raw client; the log holds one
//! ResponseComplete event per request with the right users, at the level
//! the first matching rule gives, and rotates by size into timestamped
//! backups.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Backend, Kubectl, StoreBackend};
use capstan_tests::http::Connection;
use capstan_tests::poll::wait_for;
use serde_json::{json, Value};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    nonResourceURLs: ["/readyz", "/healthz*", "/livez"]
  - level: None
    namespaces: ["quiet"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["configmaps"]
    namespaces: ["full"]
  - level: Metadata
"#;

const WAIT: Duration = Duration::from_secs(20);

struct Audited {
    api: ApiServer,
    _store: StoreBackend,
    dir: tempfile::TempDir,
    log: PathBuf,
    kubectl: Kubectl,
}

fn start(policy: &str, extra: &[&str]) -> Audited {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(&policy_file, policy).expect("write the policy");
    let log = dir.path().join("audit").join("audit.log");
    let store = StoreBackend::start(Backend::Capstan, &dir.path().join("store"));
    let mut flags = vec![
        "--audit-policy-file",
        policy_file.to_str().expect("UTF-8"),
        "--audit-log-path",
        log.to_str().expect("UTF-8"),
    ];
    flags.extend_from_slice(extra);
    let api = ApiServer::start_with(&[store.url()], dir.path(), "apiserver", &flags);
    let kubectl = Kubectl::new(dir.path(), api.port);
    Audited {
        api,
        _store: store,
        dir,
        log,
        kubectl,
    }
}

/// Every event in the file, each line whole JSON.
fn events_in(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Waits for the events `pick` chooses to be written (the log is written
/// off the request path, a moment later).
fn wait_events(log: &Path, what: &str, pick: impl Fn(&Value) -> bool) -> Vec<Value> {
    wait_count(log, what, 1, pick)
}

/// Waits for at least `count` of the events `pick` chooses.
fn wait_count(log: &Path, what: &str, count: usize, pick: impl Fn(&Value) -> bool) -> Vec<Value> {
    wait_for(WAIT, what, || {
        let found: Vec<Value> = events_in(log).into_iter().filter(|e| pick(e)).collect();
        (found.len() >= count).then_some(found)
    })
}

fn is(event: &Value, verb: &str, namespace: &str, name: &str) -> bool {
    event["verb"] == verb
        && event["objectRef"]["resource"] == "configmaps"
        && event["objectRef"]["namespace"] == namespace
        && event["objectRef"]["name"].as_str().unwrap_or("") == name
}

#[test]
fn the_log_holds_one_event_per_request_at_the_policys_level() {
    let cluster = start(POLICY, &[]);
    let kubectl = &cluster.kubectl;
    for namespace in ["full", "quiet"] {
        kubectl.ok(&["create", "namespace", namespace]);
    }
    // The admin impersonates alice: both users are recorded.
    kubectl.ok(&[
        "create",
        "configmap",
        "c1",
        "-n",
        "full",
        "--from-literal=k=v",
        "--as",
        "alice",
        "--as-group",
        "system:masters",
    ]);
    let created = wait_events(&cluster.log, "the create in full", |e| {
        is(e, "create", "full", "c1")
    });
    assert_eq!(created.len(), 1, "{created:?}");
    let event = &created[0];
    assert_eq!(event["kind"], "Event");
    assert_eq!(event["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(event["stage"], "ResponseComplete");
    assert_eq!(event["level"], "RequestResponse");
    assert_eq!(event["user"]["username"], "system:admin");
    assert_eq!(event["impersonatedUser"]["username"], "alice");
    let groups = event["impersonatedUser"]["groups"].to_string();
    assert!(groups.contains("system:masters"), "{groups}");
    assert_eq!(event["responseStatus"]["code"], 201);
    assert_eq!(event["objectRef"]["apiVersion"], "v1");
    assert_eq!(event["requestObject"]["data"]["k"], "v");
    assert_eq!(event["responseObject"]["metadata"]["name"], "c1");
    assert_eq!(
        event["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(
        event["sourceIPs"].to_string().contains("127.0.0.1"),
        "{event}"
    );
    assert!(
        event["userAgent"]
            .as_str()
            .unwrap_or("")
            .starts_with("kubectl"),
        "{event}"
    );
    assert!(event["auditID"].as_str().is_some_and(|id| !id.is_empty()));
    for stamp in ["requestReceivedTimestamp", "stageTimestamp"] {
        assert!(
            event[stamp].as_str().is_some_and(|t| t.ends_with('Z')),
            "{event}"
        );
    }

    // A None rule drops a namespace's requests; the Metadata rule
    // records the rest without bodies.
    kubectl.ok(&["create", "configmap", "hush", "-n", "quiet"]);
    kubectl.ok(&["get", "configmaps", "-n", "default"]);
    let listed = wait_events(&cluster.log, "the list in default", |e| {
        is(e, "list", "default", "")
    });
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["level"], "Metadata");
    assert!(listed[0].get("requestObject").is_none() && listed[0].get("responseObject").is_none());
    assert!(listed[0].get("impersonatedUser").is_none());
    let quiet: Vec<Value> = events_in(&cluster.log)
        .into_iter()
        .filter(|e| e["objectRef"]["namespace"] == "quiet")
        .collect();
    assert!(quiet.is_empty(), "{quiet:?}");

    // A raw client's Audit-ID is echoed and names exactly one event, the
    // answer's Status included; the same for a non-resource path.
    let mut http = Connection::connect(cluster.api.port).expect("connect");
    let missing = "/api/v1/namespaces/full/configmaps/missing";
    let response = http
        .send("GET", missing, &[("Audit-ID", "audit-test-404")], b"")
        .expect("a get");
    assert_eq!(response.status, 404);
    assert_eq!(response.header("audit-id"), ["audit-test-404"]);
    let response = http
        .send(
            "GET",
            "/version",
            &[("Audit-ID", "audit-test-version")],
            b"",
        )
        .expect("version");
    assert_eq!(response.status, 200);
    let by_id = |id: &'static str| move |e: &Value| e["auditID"] == id;
    let not_found = wait_events(&cluster.log, "the 404", by_id("audit-test-404"));
    assert_eq!(not_found.len(), 1, "{not_found:?}");
    assert_eq!(not_found[0]["responseStatus"]["code"], 404);
    assert_eq!(not_found[0]["responseStatus"]["reason"], "NotFound");
    assert_eq!(not_found[0]["responseObject"]["kind"], "Status");
    let version = wait_events(&cluster.log, "/version", by_id("audit-test-version"));
    assert_eq!(version.len(), 1, "{version:?}");
    assert_eq!(
        (&version[0]["verb"], &version[0]["requestURI"]),
        (&json!("get"), &json!("/version"))
    );
    assert!(version[0].get("objectRef").is_none());
    // Without the header, the server makes up an ID and says which.
    let response = http
        .send("GET", "/api/v1/namespaces", &[], b"")
        .expect("list");
    let id = response.header("audit-id").first().map(|s| s.to_string());
    let id = id.expect("an Audit-Id header");
    wait_events(&cluster.log, "the generated ID", |e| {
        e["auditID"] == id.as_str()
    });

    // A watch is long-running: its response starts, then completes.
    let watch = "/api/v1/namespaces/full/configmaps?watch=1&timeoutSeconds=1";
    let response = http
        .send("GET", watch, &[("Audit-ID", "audit-test-watch")], b"")
        .expect("a watch");
    assert_eq!(response.status, 200);
    let stages = wait_count(
        &cluster.log,
        "the watch's end",
        2,
        by_id("audit-test-watch"),
    );
    let stages: Vec<&Value> = stages.iter().map(|e| &e["stage"]).collect();
    assert_eq!(
        stages,
        [&json!("ResponseStarted"), &json!("ResponseComplete")]
    );

    // Every request the policy keeps is there once: one ResponseComplete
    // per audit ID, and nothing at RequestReceived (omitted).
    let events = events_in(&cluster.log);
    let mut complete: Vec<&str> = events
        .iter()
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| e["auditID"].as_str().unwrap_or(""))
        .collect();
    let count = complete.len();
    complete.sort();
    complete.dedup();
    assert_eq!(complete.len(), count, "an audit ID completed twice");
    assert!(events.iter().all(|e| e["stage"] != "RequestReceived"));
    let _ = &cluster.dir;
}

#[test]
fn the_log_rotates_into_timestamped_backups() {
    let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: RequestResponse\n    resources: [{group: \"\", resources: [configmaps]}]\n    omitStages: [RequestReceived]\n";
    let cluster = start(
        policy,
        &["--audit-log-maxsize", "1", "--audit-log-maxbackup", "1"],
    );
    let mut http = Connection::connect(cluster.api.port).expect("connect");
    // Each create is recorded with its object twice (request and
    // response): about 400 KB an event, so eight make several rotations.
    let data = "x".repeat(200 * 1024);
    for i in 0..8 {
        let body = json!({"metadata": {"name": format!("big-{i}")}, "data": {"d": data}});
        let path = "/api/v1/namespaces/default/configmaps";
        let (code, answer) = http.json("POST", path, Some(&body)).expect("a create");
        assert_eq!(code, 201, "{answer}");
    }
    let backups = || -> Vec<PathBuf> {
        let dir = cluster.log.parent().expect("the log's folder");
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("the log's folder")
            .map(|entry| entry.expect("an entry").path())
            .filter(|p| p != &cluster.log)
            .collect();
        found.sort();
        found
    };
    // The last create's event is written once the writer gets to it.
    wait_events(&cluster.log, "the last create", |e| {
        e["objectRef"]["name"] == "big-7" || e["requestObject"]["metadata"]["name"] == "big-7"
    });
    let kept = backups();
    assert_eq!(kept.len(), 1, "--audit-log-maxbackup 1 keeps one: {kept:?}");
    let name = kept[0]
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    // audit-2024-05-01T10-00-00.000.log, as kube's (lumberjack's) names.
    let stamp = name
        .strip_prefix("audit-")
        .and_then(|rest| rest.strip_suffix(".log"))
        .unwrap_or_else(|| panic!("{name}"));
    assert_eq!(stamp.len(), "2024-05-01T10-00-00.000".len(), "{name}");
    assert!(
        stamp.as_bytes()[10] == b'T' && !stamp.contains(':'),
        "{name}"
    );
    // No file grows past the limit by more than one event, and every
    // line is a whole event.
    for file in [&kept[0], &cluster.log] {
        let size = std::fs::metadata(file).expect("a file").len();
        assert!(size <= 1024 * 1024 + 500 * 1024, "{file:?}: {size}");
        assert!(!events_in(file).is_empty(), "{file:?}");
    }
    let _ = &cluster.dir;
}
