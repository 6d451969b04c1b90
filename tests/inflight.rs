//! The in-flight limits as a crowd of clients meets them:
//! `capstan-apiserver --max-requests-inflight=1
//! --max-mutating-requests-inflight=1` over HTTPS, a token user `flood`
//! (not a superuser) whose FlowSchema sends it to a priority level of one
//! seat that rejects rather than queues. A write held open (its body half
//! sent) fills it: the next write is a 429 `Status` with `Retry-After: 1`
//! while the admin (`system:masters`) is still served; a watch open all
//! along takes no slot; a flood of concurrent lists sees only 200s and
//! 429s; the metrics count what happened.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Backend, StoreBackend, WatchEvents};
use capstan_tests::http::{Connection, Response};
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const FLOOD: &str = "flood-token";

fn flood() -> Identity {
    Identity::Token(FLOOD.into())
}

/// The value of one series of the server's /metrics, 0 if absent.
fn metric(port: u16, series: &str) -> f64 {
    let mut admin = Connection::connect(port).expect("connect");
    let response = admin.send("GET", "/metrics", &[], b"").expect("/metrics");
    response
        .text()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A 429 `Status` whose `Retry-After` header and `retryAfterSeconds`
/// agree; returns the seconds. The first rejection of a level says 1; a
/// level that keeps rejecting asks clients to wait longer.
#[track_caller]
fn assert_too_many(response: &Response) -> u64 {
    assert_eq!(response.status, 429, "{}", response.text());
    let header = response.header("retry-after");
    let seconds: u64 = header
        .first()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After in seconds: {header:?}"));
    assert!(seconds >= 1, "Retry-After {seconds}");
    let status = response.json().expect("a Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(
        status["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(status["details"]["retryAfterSeconds"], seconds);
    seconds
}

fn configmap(name: &str, size: usize) -> serde_json::Value {
    json!({"metadata": {"name": name}, "data": {"d": "x".repeat(size)}})
}

/// A level of one seat, lending and borrowing nothing, that rejects what
/// does not fit; `flood`'s requests go there.
fn confine_flood(admin: &mut Connection, port: u16) {
    let group = "/apis/flowcontrol.apiserver.k8s.io/v1";
    let level = json!({"metadata": {"name": "flood"}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Reject"}}}});
    let path = format!("{group}/prioritylevelconfigurations");
    let (code, level) = admin.json("POST", &path, Some(&level)).expect("a level");
    assert_eq!(code, 201, "{level}");
    let schema = json!({"metadata": {"name": "flood"}, "spec": {
        "priorityLevelConfiguration": {"name": "flood"}, "matchingPrecedence": 500,
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "flood"}}],
                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                      "namespaces": ["*"], "clusterScope": true}]}]}});
    let path = format!("{group}/flowschemas");
    let (code, schema) = admin.json("POST", &path, Some(&schema)).expect("a schema");
    assert_eq!(code, 201, "{schema}");
    let level_uid = level["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string();
    wait_for(
        Duration::from_secs(30),
        "flood's level to be in force",
        || {
            let mut flooder = Connection::connect_as(port, &flood()).ok()?;
            let response = flooder.send_json("GET", CMS, None).ok()?;
            let header = response.header("x-kubernetes-pf-prioritylevel-uid");
            (header == [level_uid.as_str()]).then_some(())
        },
    );
}

#[test]
fn past_the_limit_requests_are_refused_and_watches_do_not_count() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{FLOOD},flood,flood-uid\n")).expect("the token file");
    let store = StoreBackend::start(Backend::Capstan, &dir.path().join("store"));
    let flags = [
        "--authorization-mode=AlwaysAllow",
        "--token-auth-file",
        tokens.to_str().expect("UTF-8"),
        "--max-requests-inflight=1",
        "--max-mutating-requests-inflight=1",
    ];
    let api = ApiServer::start_with(&[store.url()], dir.path(), "apiserver", &flags);
    let port = api.port;
    let mut admin = Connection::connect(port).expect("connect");
    confine_flood(&mut admin, port);
    for i in 0..60 {
        let body = configmap(&format!("c{i}"), 8 * 1024);
        let (code, answer) = admin.json("POST", CMS, Some(&body)).expect("a create");
        assert_eq!(code, 201, "{answer}");
    }

    // A watch holds no slot: with room for one read, flood's list still
    // gets it, and no read is counted in flight while only the watch is.
    let mut flooder = Connection::connect_as(port, &flood()).expect("connect");
    let (code, list) = flooder.json("GET", CMS, None).expect("a list");
    assert_eq!(code, 200, "{list}");
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a revision");
    let path = format!("{CMS}?watch=1&resourceVersion={from}");
    let mut watch = WatchEvents::connect_as(port, &flood()).start(&path);
    let (code, list) = flooder.json("GET", CMS, None).expect("a list");
    assert_eq!(code, 200, "{list}");
    let reads = "apiserver_current_inflight_requests{request_kind=\"readOnly\"}";
    assert_eq!(metric(port, reads), 0.0);

    // A write whose body is half sent holds the one mutating slot.
    let body = configmap("held", 16).to_string().into_bytes();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut held = Connection::connect_as(port, &flood()).expect("connect");
    let headers = [("Content-Type", "application/json")];
    held.send_partial("POST", CMS, &headers, body.len(), first)
        .expect("half a request");
    let writes = "apiserver_current_inflight_requests{request_kind=\"mutating\"}";
    wait_for(
        Duration::from_secs(20),
        "the held write to be in flight",
        || (metric(port, writes) == 1.0).then_some(()),
    );
    let refused = flooder
        .send_json("POST", CMS, Some(&configmap("refused", 16)))
        .expect("a create");
    assert_eq!(assert_too_many(&refused), 1);
    // kube's superuser is always answered.
    let (code, answer) = admin
        .json("POST", CMS, Some(&configmap("by-admin", 16)))
        .expect("a create");
    assert_eq!(code, 201, "{answer}");
    let finished = held.finish(rest).expect("the rest of the body");
    assert_eq!(finished.status, 201, "{}", finished.text());
    let dropped = "apiserver_dropped_requests_total{request_kind=\"mutating\"}";
    assert_eq!(metric(port, dropped), 1.0);

    // A flood of concurrent lists by 8 clients: each answer is a 200 or a
    // 429 that says when to come back, never anything else; they go on
    // until the limit has refused someone.
    let refused_one = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let refused_one = refused_one.clone();
            std::thread::spawn(move || {
                let mut client = Connection::connect_as(port, &flood()).expect("connect");
                let mut codes = Vec::new();
                for _ in 0..300 {
                    let response = client.send_json("GET", CMS, None).expect("a list");
                    if response.status == 429 {
                        assert_too_many(&response);
                        refused_one.store(true, Ordering::SeqCst);
                    }
                    codes.push(response.status);
                    if refused_one.load(Ordering::SeqCst) && codes.len() >= 5 {
                        break;
                    }
                }
                codes
            })
        })
        .collect();
    let codes: Vec<u16> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("a client"))
        .collect();
    assert!(codes.iter().all(|c| *c == 200 || *c == 429), "{codes:?}");
    assert!(codes.contains(&200), "{codes:?}");
    assert!(
        refused_one.load(Ordering::SeqCst),
        "no list was refused: {codes:?}"
    );
    let dropped_reads = "apiserver_dropped_requests_total{request_kind=\"readOnly\"}";
    assert!(metric(port, dropped_reads) >= 1.0);

    // The watch opened before everything is still served.
    let (code, _) = admin
        .json("POST", CMS, Some(&configmap("after", 16)))
        .expect("a create");
    assert_eq!(code, 201);
    let seen = wait_for(Duration::from_secs(20), "the watch to see `after`", || {
        let event = watch.next(Duration::from_secs(1))?;
        (event["object"]["metadata"]["name"] == "after").then_some(event)
    });
    assert_eq!(seen["type"], "ADDED");
}
