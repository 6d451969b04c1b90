//! Two `capstan-apiserver` processes on one store: reads are consistent
//! across gateways (a consistent read waits for its watch cache to catch
//! up with the store), and watches resume on one gateway at a revision
//! seen on the other. Raw HTTP on kept-alive connections, so that the
//! gap between a write and the next read is as small as it gets.

use std::time::Duration;

use serde_json::{json, Value};

use capstan_tests::apiserver::{ApiCluster, Backend, Http, WatchEvents};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

capstan_tests::on_both_backends!(
    a_write_through_one_apiserver_is_read_at_once_through_the_other,
    a_watch_on_one_apiserver_resumes_at_a_revision_seen_on_the_other,
    a_watch_without_a_revision_starts_from_the_current_state,
);

fn rv(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn configmap(name: &str, value: i64) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value.to_string()}})
}

fn a_write_through_one_apiserver_is_read_at_once_through_the_other(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let other = cluster.add_apiserver("apiserver-b");
    let mut a = Http::connect(cluster.port);
    let mut b = Http::connect(other.port);

    for i in 0..60 {
        let name = format!("rw-{i}");
        let (code, created) = a.request("POST", CMS, Some(&configmap(&name, 0)));
        assert_eq!(code, 201, "{created}");
        let (code, got) = b.get(&format!("{CMS}/{name}"));
        assert_eq!(
            code, 200,
            "round {i}: a consistent get on B misses A's create: {got}"
        );
        assert_eq!(rv(&got), rv(&created));

        let patch = json!({"data": {"v": "1"}});
        let (code, patched) = a.request("PATCH", &format!("{CMS}/{name}"), Some(&patch));
        assert_eq!(code, 200, "{patched}");
        let (_, list) = b.get(CMS);
        assert!(rv(&list) >= rv(&patched), "{list}");
        let item = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("round {i}: B's list misses {name}"));
        assert_eq!(item["data"]["v"], "1", "round {i}: B's list is stale");

        if i % 2 == 1 {
            let (code, _) = a.request("DELETE", &format!("{CMS}/{name}"), None);
            assert_eq!(code, 200);
            let (code, gone) = b.get(&format!("{CMS}/{name}"));
            assert_eq!(
                code, 404,
                "round {i}: B still has A's deleted {name}: {gone}"
            );
            let (_, list) = b.get(CMS);
            assert!(
                !names(&list).contains(&name),
                "round {i}: B lists deleted {name}"
            );
        }
    }

    // A write elsewhere in the store: B's configmaps cache sees no event
    // at that revision, yet a consistent read must not wait for one.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}});
    let (code, secret) = a.request("POST", "/api/v1/namespaces/default/secrets", Some(&secret));
    assert_eq!(code, 201, "{secret}");
    // Waiting for an event that never comes would end in a 504, not a 200.
    let (code, list) = b.get(CMS);
    assert_eq!(code, 200, "{list}");
    assert!(rv(&list) >= rv(&secret));
    assert_eq!(names(&list).len(), 30);

    // Pages of a consistent list from B's cache continue from the store
    // at the same revision, whatever is written in between.
    let (_, first) = b.get(&format!("{CMS}?limit=10"));
    assert_eq!(names(&first).len(), 10, "{first}");
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    assert_eq!(first["metadata"]["remainingItemCount"], 20);
    a.request("POST", CMS, Some(&configmap("zz-late", 0)));
    let mut seen = names(&first);
    let mut token = token.to_string();
    loop {
        let (code, page) = b.get(&format!("{CMS}?limit=10&continue={token}"));
        assert_eq!(code, 200, "{page}");
        assert_eq!(
            page["metadata"]["resourceVersion"],
            first["metadata"]["resourceVersion"]
        );
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_string(),
            _ => break,
        }
    }
    assert_eq!(seen.len(), 30, "{seen:?}");
    assert!(!seen.contains(&"zz-late".to_string()));

    // resourceVersion semantics on B, with revisions learnt on A.
    let (_, late) = a.get(&format!("{CMS}/zz-late"));
    let late_rv = rv(&late);
    let (code, got) = b.get(&format!("{CMS}/zz-late?resourceVersion={late_rv}"));
    assert_eq!((code, rv(&got)), (200, late_rv), "not older than: {got}");
    let (code, list) = b.get(&format!(
        "{CMS}?resourceVersion={late_rv}&resourceVersionMatch=NotOlderThan"
    ));
    assert_eq!(code, 200);
    assert!(names(&list).contains(&"zz-late".to_string()));
    let (code, list) = b.get(&format!("{CMS}?resourceVersion=0"));
    assert_eq!(code, 200, "{list}");
    let future = late_rv + 1_000_000;
    let (code, status) = b.get(&format!("{CMS}?resourceVersion={future}"));
    assert_eq!(
        (code, status["reason"].as_str()),
        (504, Some("Timeout")),
        "{status}"
    );
    let (code, status) = b.get(&format!("{CMS}?watch=1&fieldSelector=spec.nope%3Dx"));
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    let mut expired = WatchEvents::open(other.port, &format!("{CMS}?watch=1&resourceVersion=1"));
    let error = expired
        .next(Duration::from_secs(5))
        .expect("an ERROR event");
    assert_eq!(error["type"], "ERROR", "{error}");
    assert_eq!(error["object"]["code"], 410, "{error}");
    let (code, status) = b.get(&format!(
        "{CMS}?resourceVersion={}&resourceVersionMatch=Exact&limit=5",
        rv(&first)
    ));
    assert_eq!(code, 200, "exact reads come from the store: {status}");
    assert!(!names(&status).contains(&"zz-late".to_string()));
}

/// Collects a watch's events up to its first BOOKMARK (or a quiet spell).
fn initial_events(watch: &mut WatchEvents) -> (Vec<String>, Option<Value>) {
    let mut added = Vec::new();
    while let Some(event) = watch.next(Duration::from_millis(200)) {
        match event["type"].as_str() {
            Some("ADDED") => added.push(
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            Some("BOOKMARK") => return (added, Some(event["object"].clone())),
            _ => panic!("not an initial event: {event}"),
        }
    }
    (added, None)
}

/// A watch without a revision starts from the store's current state, as
/// a consistent list would: its initial ADDEDs include a write made a
/// moment before through the other gateway.
fn a_watch_without_a_revision_starts_from_the_current_state(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let other = cluster.add_apiserver("apiserver-b");
    let mut a = Http::connect(cluster.port);
    for i in 0..20 {
        let name = format!("iw-{i}");
        let connected = WatchEvents::connect(other.port);
        let (code, created) = a.request("POST", CMS, Some(&configmap(&name, i)));
        assert_eq!(code, 201, "{created}");
        let (path, streaming) = if i % 2 == 0 {
            (format!("{CMS}?watch=1"), false)
        } else {
            let query = "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
            (
                format!("{CMS}?{query}&resourceVersion={}", rv(&created)),
                true,
            )
        };
        let mut watch = connected.start(&path);
        let (added, bookmark) = initial_events(&mut watch);
        assert_eq!(added.len(), i as usize + 1, "round {i}: {added:?}");
        assert!(added.contains(&name), "round {i}: {added:?}");
        if streaming {
            let bookmark = bookmark.expect("the initial-events-end bookmark");
            assert_eq!(
                bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            assert!(rv(&bookmark) >= rv(&created), "{bookmark}");
        }
    }
}

fn a_watch_on_one_apiserver_resumes_at_a_revision_seen_on_the_other(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let other = cluster.add_apiserver("apiserver-b");
    let mut a = Http::connect(cluster.port);
    let mut b = Http::connect(other.port);

    // Writes through both gateways; the watches start at revisions that
    // only the other gateway has answered with.
    let (_, first) = a.request("POST", CMS, Some(&configmap("w", 0)));
    let on_b = WatchEvents::open(
        other.port,
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&first)),
    );
    let (_, second) = b.request("POST", CMS, Some(&configmap("w2", 0)));
    let on_a = WatchEvents::open(
        cluster.port,
        &format!("{CMS}?watch=1&resourceVersion={}", rv(&second)),
    );

    let mut expected_b = vec![("ADDED".to_string(), "w2".to_string(), rv(&second))];
    let mut expected_a = Vec::new();
    for i in 1..=40 {
        // Alternate gateways; object "w" is patched, deleted and created again.
        let (http, name) = if i % 2 == 0 {
            (&mut a, "w")
        } else {
            (&mut b, "w")
        };
        let (code, written) = if i % 10 == 0 {
            http.request("DELETE", &format!("{CMS}/{name}"), None)
        } else if i % 10 == 1 && i > 1 {
            http.request("POST", CMS, Some(&configmap(name, i)))
        } else {
            let patch = json!({"data": {"v": i.to_string()}});
            http.request("PATCH", &format!("{CMS}/{name}"), Some(&patch))
        };
        assert!(code == 200 || code == 201, "{written}");
        let kind = match (i % 10, code) {
            (0, _) => "DELETED",
            (_, 201) => "ADDED",
            _ => "MODIFIED",
        };
        // A DELETE answers with the last state; the event has a new revision.
        let event_rv = if kind == "DELETED" { 0 } else { rv(&written) };
        let event = (kind.to_string(), name.to_string(), event_rv);
        expected_b.push(event.clone());
        expected_a.push(event);
    }

    for (mut watch, expected, gateway) in [(on_b, expected_b, "B"), (on_a, expected_a, "A")] {
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            let Some(event) = watch.next(Duration::from_secs(10)) else {
                panic!("watch on {gateway} went quiet after {seen:?}");
            };
            let kind = event["type"].as_str().unwrap().to_string();
            let object = &event["object"];
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            seen.push((kind, name, rv(object)));
        }
        // Nothing more: no duplicates after the last expected event.
        if let Some(extra) = watch.next(Duration::from_millis(300)) {
            panic!("watch on {gateway}: an extra event {extra}");
        }
        let mut last = 0;
        for ((kind, name, revision), (want_kind, want_name, want_rv)) in seen.iter().zip(&expected)
        {
            assert_eq!(
                (kind, name),
                (want_kind, want_name),
                "watch on {gateway}: {seen:?}"
            );
            if *want_rv != 0 {
                assert_eq!(revision, want_rv, "watch on {gateway}: {seen:?}");
            }
            assert!(
                *revision > last,
                "watch on {gateway} out of order: {seen:?}"
            );
            last = *revision;
        }
    }
}
