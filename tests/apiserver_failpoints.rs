//! The API server's test-only failpoint, the deliberately broken server
//! the Kubernetes fault suite is shown to catch: with
//! `CAPSTAN_FAILPOINT_DROP_WATCH_EVENT_EVERY=N` in its environment, every
//! Nth ADDED, MODIFIED or DELETED event it would send on a watch is
//! dropped (every other test runs without it).

use std::time::Duration;

use capstan_tests::apiserver::{ApiServer, Http, WatchEvents};
use capstan_tests::store::TempStore;
use serde_json::json;

#[test]
fn every_third_watch_event_is_dropped_when_the_failpoint_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = TempStore::start(&[]);
    let env = [("CAPSTAN_FAILPOINT_DROP_WATCH_EVENT_EVERY", "3")];
    let api = ApiServer::start_with_env(&[store.url()], dir.path(), "apiserver", &[], &env);
    let mut http = Http::connect(api.port);
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, list) = http.get(path);
    assert_eq!(code, 200, "{list}");
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a resourceVersion");
    let mut watch = WatchEvents::open(api.port, &format!("{path}?watch=1&resourceVersion={from}"));
    for i in 1..=7 {
        let body = json!({"metadata": {"name": format!("c{i}")}, "data": {"n": i.to_string()}});
        let (code, created) = http.request("POST", path, Some(&body));
        assert_eq!(code, 201, "{created}");
    }
    // The third and sixth events are dropped; the rest arrive in order.
    let names: Vec<String> = (0..5)
        .map(|_| {
            let event = watch.next(Duration::from_secs(30)).expect("an event");
            assert_eq!(event["type"], "ADDED", "{event}");
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["c1", "c2", "c4", "c5", "c7"]);
}
