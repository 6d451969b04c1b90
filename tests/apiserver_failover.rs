//! The API server against store failures, compaction and future revisions:
//! real `capstan-store` clusters (and a real etcd 3.4) killed with SIGKILL,
//! driven over HTTP and kubectl.

use std::time::{Duration, Instant};

use capstan_tests::apiserver::{ApiServer, Backend, Http, Kubectl, StoreBackend, WatchEvents};
use capstan_tests::cluster::Cluster;
use capstan_tests::on_both_backends;
use capstan_tests::poll::wait_for;
use capstan_tests::store::http_get;
use etcd_client::{Client, GetOptions};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn rv(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

/// Creates a configmap through the API; its resourceVersion.
fn create(http: &mut Http, name: &str) -> i64 {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let (code, object) = http.request("POST", CMS, Some(&body));
    assert_eq!(code, 201, "create {name}: {object}");
    rv(&object)
}

/// The next `count` events: (type, name, resourceVersion).
fn next_events(watch: &mut WatchEvents, count: usize) -> Vec<(String, String, i64)> {
    (0..count)
        .map(|i| {
            let event = watch
                .next(Duration::from_secs(15))
                .unwrap_or_else(|| panic!("watch ended or went quiet after {i} of {count} events"));
            let object = &event["object"];
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let kind = event["type"].as_str().unwrap_or("").to_string();
            let revision = match kind.as_str() {
                "ERROR" => 0,
                _ => rv(object),
            };
            (kind, name, revision)
        })
        .collect()
}

/// A tokio runtime and an etcd client on `urls`, for looking at the store
/// itself.
fn store_client(urls: &[String]) -> (tokio::runtime::Runtime, Client) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let client = runtime
        .block_on(Client::connect(urls, None))
        .expect("connect to the store");
    (runtime, client)
}

/// Writes `object` at `key` straight into the store; the revision.
fn put_direct(
    runtime: &tokio::runtime::Runtime,
    client: &mut Client,
    key: &str,
    object: Value,
) -> i64 {
    let response = runtime
        .block_on(client.put(key, object.to_string(), None))
        .expect("put into the store");
    response.header().expect("a header").revision()
}

#[test]
fn an_apiserver_starts_and_serves_while_a_listed_member_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    cluster.members[0].kill9();
    // The dead member is listed first, so it is the one tried first. The
    // launcher waits for /readyz with a deadline; how long it took is
    // reported, not asserted (speed belongs in `make bench`).
    let started = Instant::now();
    let api = ApiServer::start_with(&cluster.urls(), dir.path(), "apiserver", &[]);
    let ready_after = started.elapsed();
    eprintln!("ready {ready_after:?} after start with the first listed member down");
    let kubectl = Kubectl::new(dir.path(), api.port);
    kubectl.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=blue",
    ]);
    let mode = kubectl.ok(&[
        "get",
        "configmap",
        "settings",
        "-o",
        "jsonpath={.data.mode}",
    ]);
    assert_eq!(mode, "blue");
}

#[test]
fn an_apiserver_keeps_serving_when_the_leader_it_uses_is_killed() {
    keeps_serving_when_its_member_dies(|cluster| cluster.leader().expect("a leader"));
}

#[test]
fn an_apiserver_keeps_serving_when_the_follower_it_uses_is_killed() {
    keeps_serving_when_its_member_dies(|cluster| (cluster.leader().expect("a leader") + 1) % 3);
}

/// The member `pick` chooses is listed first, so the API server uses it;
/// it is killed with a watch open, and then writes, consistent reads and
/// the watch must go on through the other two.
fn keeps_serving_when_its_member_dies(pick: fn(&Cluster) -> usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let victim = pick(&cluster);
    let mut urls = cluster.urls();
    let first = urls.remove(victim);
    urls.insert(0, first);
    let api = ApiServer::start_with(&urls, dir.path(), "apiserver", &[]);
    let mut http = Http::connect(api.port);
    for i in 0..3 {
        create(&mut http, &format!("before-{i}"));
    }
    let (_, list) = http.get(CMS);
    let mut watch = WatchEvents::open(
        api.port,
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&list)),
    );

    cluster.members[victim].kill9();
    cluster.wait_for_leader(Duration::from_secs(10));

    let mut http = Http::connect(api.port);
    let mut expected = Vec::new();
    for i in 0..10 {
        let name = format!("after-{i}");
        create(&mut http, &name);
        expected.push(("ADDED".to_string(), name));
    }
    let patch = json!({"data": {"k": "v"}});
    let (code, patched) = http.request("PATCH", &format!("{CMS}/after-0"), Some(&patch));
    assert_eq!(code, 200, "patch: {patched}");
    expected.push(("MODIFIED".into(), "after-0".into()));
    let (code, deleted) = http.request("DELETE", &format!("{CMS}/after-1"), None);
    assert_eq!(code, 200, "delete: {deleted}");
    expected.push(("DELETED".into(), "after-1".into()));

    // Consistent reads see every write.
    let (code, list) = http.get(CMS);
    assert_eq!(code, 200, "list: {list}");
    let mut names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..3).map(|i| format!("before-{i}")).collect();
    want.extend((0..10).filter(|i| *i != 1).map(|i| format!("after-{i}")));
    want.sort();
    assert_eq!(names, want);
    let (code, object) = http.get(&format!("{CMS}/after-0"));
    assert_eq!((code, &object["data"]["k"]), (200, &json!("v")));

    // The watch opened before the kill sees every later event once, in order.
    let events = next_events(&mut watch, expected.len());
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|(k, n, _)| (k.clone(), n.clone()))
        .collect();
    assert_eq!(seen, expected, "log:\n{}", api.log_text());
    let revisions: Vec<i64> = events.iter().map(|(_, _, r)| *r).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "out of order: {revisions:?}"
    );
    assert!(
        watch.next(Duration::from_secs(2)).is_none(),
        "an event too many"
    );
    // The killed member was the one in use: requests moved on to another
    // member, as the API server's metrics say.
    let metrics = http_get(api.port, "/metrics").expect("the API server's metrics");
    let failovers: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("apiserver_storage_failovers_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no failover counter in:\n{metrics}"));
    assert!(failovers >= 1.0, "no request moved on: {metrics}");
}

#[test]
fn with_no_member_answering_requests_fail_with_a_status_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let api = ApiServer::start_with(&cluster.urls(), dir.path(), "apiserver", &[]);
    let mut http = Http::connect(api.port);
    create(&mut http, "before");
    for member in &mut cluster.members {
        member.kill9();
    }
    let started = Instant::now();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}});
    let (code, status) = http.request("POST", CMS, Some(&body));
    let write_took = started.elapsed();
    assert_eq!(code, 503, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "ServiceUnavailable");
    let started = Instant::now();
    let (code, status) = Http::connect(api.port).get(&format!("{CMS}/before"));
    let read_took = started.elapsed();
    // Which timeout answers first (the store client's or the wait for a
    // linearizable read) depends on load; either is this Status.
    assert_eq!(code, 503, "{status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    // A hang fails at the client's read timeout; how fast the answer
    // comes is reported, not asserted (speed belongs in `make bench`).
    eprintln!("no member: the write failed after {write_took:?}, the read after {read_took:?}");
}

/// An API server compacting every 2 s: history older than one interval
/// goes; a watch or an exact list from before it is 410 Expired; and a
/// second API server on the store does not compact in the same interval.
fn compacts_the_store_once_per_interval(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreBackend::start(backend, &dir.path().join("store"));
    let urls = vec![store.url()];
    let every_2s = ["--etcd-compaction-interval", "2s"];
    let a = ApiServer::start_with(&urls, dir.path(), "a", &every_2s);
    let mut http = Http::connect(a.port);
    let first = create(&mut http, "c-0");
    for i in 1..5 {
        create(&mut http, &format!("c-{i}"));
    }
    let (runtime, mut client) = store_client(&urls);
    let key = "/registry/configmaps/default/c-0";
    wait_for(
        Duration::from_secs(20),
        "the first write's revision to be compacted",
        || {
            let options = GetOptions::new().with_revision(first);
            match runtime.block_on(client.get(key, Some(options))) {
                Err(err) if err.to_string().contains("compacted") => Some(()),
                _ => None,
            }
        },
    );

    let exact = format!("{CMS}?resourceVersion={first}&resourceVersionMatch=Exact");
    let (code, status) = Http::connect(a.port).get(&exact);
    assert_eq!(
        (code, &status["reason"]),
        (410, &json!("Expired")),
        "{status}"
    );

    // A server started now holds nothing from before the compaction.
    let b = ApiServer::start_with(&urls, dir.path(), "b", &every_2s);
    let mut watch = WatchEvents::open(b.port, &format!("{CMS}?watch=1&resourceVersion={first}"));
    let event = watch.next(Duration::from_secs(5)).expect("an ERROR event");
    assert_eq!(event["type"], "ERROR", "{event}");
    assert_eq!(event["object"]["code"], 410, "{event}");
    assert_eq!(event["object"]["reason"], "Expired", "{event}");

    // Two servers share the schedule through compact_rev_key: compactions
    // keep coming (its version keeps growing) while both run. How often is
    // a matter of time, which belongs in `make bench`, not here.
    let version = |client: &mut Client| {
        let response = runtime
            .block_on(client.get("compact_rev_key", None))
            .unwrap();
        response.kvs().first().map_or(0, |kv| kv.version())
    };
    let before = version(&mut client);
    wait_for(
        Duration::from_secs(60),
        "two more compactions with two API servers",
        || (version(&mut client) >= before + 2).then_some(()),
    );
    drop(b);
}

/// Watches, gets and lists at a revision the store has not reached wait
/// about 3 s and fail with kube-apiserver's 504; one the store has just
/// reached (through a write the cache may not have seen yet, or a write
/// to another resource, which this cache never sees) is served.
fn future_revisions(backend: Backend) {
    let cluster = capstan_tests::apiserver::ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    let now = create(&mut http, "now");
    let future = now + 1000;

    let started = Instant::now();
    let (code, status) = http.get(&format!("{CMS}?watch=1&resourceVersion={future}"));
    let waited = started.elapsed();
    eprintln!("{backend:?}: a watch at a future revision was answered after {waited:?}");
    assert_too_large(code, &status, future);
    let (code, status) = http.get(&format!("{CMS}/now?resourceVersion={future}"));
    assert_too_large(code, &status, future);
    let list = format!("{CMS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan");
    let (code, status) = http.get(&list);
    assert_too_large(code, &status, future);

    let (runtime, mut client) = store_client(&[cluster.store.url()]);
    let direct = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "direct", "namespace": "default", "uid": "direct-uid",
                     "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let before_direct = WatchEvents::connect(cluster.port);
    let at_direct = WatchEvents::connect(cluster.port);
    let written = put_direct(
        &runtime,
        &mut client,
        "/registry/configmaps/default/direct",
        direct,
    );
    let mut before_direct =
        before_direct.start(&format!("{CMS}?watch=1&resourceVersion={}", written - 1));
    let mut at_direct = at_direct.start(&format!("{CMS}?watch=1&resourceVersion={written}"));
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "elsewhere", "namespace": "default", "uid": "secret-uid",
                     "creationTimestamp": "2026-01-01T00:00:00Z"}});
    let elsewhere = put_direct(
        &runtime,
        &mut client,
        "/registry/secrets/default/elsewhere",
        secret,
    );
    // Served (a 200 stream, not the 504 of a revision never reached).
    let mut at_elsewhere = WatchEvents::open(
        cluster.port,
        &format!("{CMS}?watch=1&resourceVersion={elsewhere}"),
    );

    let later = create(&mut http, "later");
    let names = |events: Vec<(String, String, i64)>| -> Vec<(String, String)> {
        events.into_iter().map(|(k, n, _)| (k, n)).collect()
    };
    let added = |name: &str| ("ADDED".to_string(), name.to_string());
    assert_eq!(
        names(next_events(&mut before_direct, 2)),
        vec![added("direct"), added("later")]
    );
    assert_eq!(names(next_events(&mut at_direct, 1)), vec![added("later")]);
    assert_eq!(
        names(next_events(&mut at_elsewhere, 1)),
        vec![added("later")]
    );
    assert!(later > elsewhere);
}

fn assert_too_large(code: u16, status: &Value, requested: i64) {
    assert_eq!(code, 504, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Timeout");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "Too large resource version: {requested}, current: "
        )),
        "{message}"
    );
    let cause = &status["details"]["causes"][0];
    assert_eq!(cause["reason"], "ResourceVersionTooLarge", "{status}");
    assert_eq!(cause["message"], "Too large resource version", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
}

on_both_backends!(compacts_the_store_once_per_interval, future_revisions);
