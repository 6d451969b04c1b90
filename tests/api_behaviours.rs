//! Kubernetes API behaviours checked through raw HTTP against
//! `capstan-apiserver`, on `capstan-store` and on a real etcd: `fieldValidation`, `generateName`,
//! delete preconditions, `/status` subresources, watches that end at
//! `timeoutSeconds` or carry periodic BOOKMARKs, and deletecollection
//! with a field selector.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Http, WatchEvents};
use capstan_tests::http::Connection;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// A guard against hanging, not a measure of speed.
const PATIENCE: Duration = Duration::from_secs(60);

capstan_tests::on_both_backends!(
    field_validation_strict_warn_ignore_and_a_bad_value,
    generate_name_makes_distinct_names_from_the_prefix,
    delete_preconditions_on_uid_and_resource_version,
    the_status_subresource_changes_only_status,
    a_watch_ends_at_its_timeout_seconds,
    deletecollection_with_a_field_selector_deletes_only_the_match,
    watches_get_periodic_bookmarks,
);

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn create(http: &mut Http, name: &str) -> Value {
    let (code, object) = http.request("POST", CMS, Some(&config_map(name)));
    assert_eq!(code, 201, "{object}");
    object
}

/// The ConfigMaps' names, without `kube-root-ca.crt` (the root CA
/// publisher keeps it in every namespace, as kube's does).
fn names(http: &mut Http) -> Vec<String> {
    let (code, list) = http.get(CMS);
    assert_eq!(code, 200, "{list}");
    let mut names: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|name| name != ROOT_CA)
        .collect();
    names.sort();
    names
}

const ROOT_CA: &str = "kube-root-ca.crt";

fn field_validation_strict_warn_ignore_and_a_bad_value(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let post = |query: &str, name: &str| {
        let mut body = config_map(name);
        body["bogus"] = json!(1);
        let headers = [
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
        ];
        Connection::connect(cluster.port)
            .and_then(|mut c| {
                c.send(
                    "POST",
                    &format!("{CMS}{query}"),
                    &headers,
                    body.to_string().as_bytes(),
                )
            })
            .unwrap_or_else(|e| panic!("POST {query}: {e}"))
    };
    let strict = post("?fieldValidation=Strict", "strict");
    assert_eq!(strict.status, 400, "{}", strict.text());
    let status = strict.json().expect("a Status");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"strict decoding error: unknown field "bogus""#),
        "{status}"
    );
    let warn = post("?fieldValidation=Warn", "warn");
    assert_eq!(warn.status, 201, "{}", warn.text());
    assert_eq!(
        warn.header("warning"),
        [r#"299 - "unknown field \"bogus\"""#]
    );
    let ignore = post("?fieldValidation=Ignore", "ignore");
    assert_eq!(ignore.status, 201, "{}", ignore.text());
    assert!(ignore.header("warning").is_empty(), "{:?}", ignore.headers);
    let bad = post("?fieldValidation=Loudly", "bad");
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.json().expect("a Status")["kind"], "Status");
    // Only the accepted ones were written, without the unknown field.
    let mut http = Http::connect(cluster.port);
    assert_eq!(names(&mut http), ["ignore", "warn"]);
    let (_, stored) = http.get(&format!("{CMS}/warn"));
    assert!(stored.get("bogus").is_none(), "{stored}");
}

fn generate_name_makes_distinct_names_from_the_prefix(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let mut made = Vec::new();
    for _ in 0..3 {
        let (code, object) = http.request("POST", CMS, Some(&body));
        assert_eq!(code, 201, "{object}");
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
        assert_eq!(object["metadata"]["generateName"], "gen-");
        made.push(name);
    }
    made.sort();
    made.dedup();
    assert_eq!(made.len(), 3, "distinct names: {made:?}");
    assert_eq!(names(&mut http), made);
}

fn delete_preconditions_on_uid_and_resource_version(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    let object = create(&mut http, "guarded");
    let uid = object["metadata"]["uid"].as_str().unwrap();
    let rv = object["metadata"]["resourceVersion"].as_str().unwrap();
    let path = format!("{CMS}/guarded");
    for preconditions in [
        json!({"uid": "not-the-uid"}),
        json!({"resourceVersion": "1"}),
    ] {
        let options =
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions});
        let (code, status) = http.request("DELETE", &path, Some(&options));
        assert_eq!(code, 409, "{preconditions}: {status}");
        assert_eq!(status["reason"], "Conflict", "{status}");
        assert_eq!(http.get(&path).0, 200, "still there after {preconditions}");
    }
    let options = json!({"apiVersion": "v1", "kind": "DeleteOptions",
        "preconditions": {"uid": uid, "resourceVersion": rv}});
    let (code, deleted) = http.request("DELETE", &path, Some(&options));
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(http.get(&path).0, 404);
}

fn the_status_subresource_changes_only_status(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    let services = "/api/v1/namespaces/default/services";
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]}});
    let (code, created) = http.request("POST", services, Some(&service));
    assert_eq!(code, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["ports"][0]["port"] = json!(81);
    changed["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}});
    let (code, updated) = http.request("PUT", &format!("{services}/s/status"), Some(&changed));
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["status"], changed["status"], "status is written");
    assert_eq!(
        updated["spec"]["ports"][0]["port"], 80,
        "spec is not: {updated}"
    );
    // And the main resource leaves status alone.
    let mut main = updated.clone();
    main["status"] = json!({"loadBalancer": {}});
    main["metadata"]["labels"] = json!({"touched": "yes"});
    let (code, replaced) = http.request("PUT", &format!("{services}/s"), Some(&main));
    assert_eq!(code, 200, "{replaced}");
    assert_eq!(replaced["status"], changed["status"], "{replaced}");
    assert_eq!(replaced["metadata"]["labels"]["touched"], "yes");
}

fn a_watch_ends_at_its_timeout_seconds(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    create(&mut http, "before");
    let mut watch = WatchEvents::open(cluster.port, &format!("{CMS}?watch=1&timeoutSeconds=2"));
    let events = watch
        .ends_within(PATIENCE)
        .unwrap_or_else(|e| panic!("the watch did not end at its timeout: {e}"));
    let added: Vec<&str> = events
        .iter()
        .filter(|e| e["object"]["metadata"]["name"] != ROOT_CA)
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(added, ["ADDED"], "{events:?}");
}

fn deletecollection_with_a_field_selector_deletes_only_the_match(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    for name in ["a", "b", "c"] {
        create(&mut http, name);
    }
    let (code, status) = http.request(
        "DELETE",
        &format!("{CMS}?fieldSelector=metadata.name%3Db"),
        None,
    );
    assert_eq!(code, 200, "{status}");
    assert_eq!(names(&mut http), ["a", "c"]);
}

/// Besides the one that ends the initial events, a watch that allows
/// bookmarks gets them periodically, at a revision not behind the writes
/// it has seen.
fn watches_get_periodic_bookmarks(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let mut http = Http::connect(cluster.port);
    let created = create(&mut http, "seen");
    let rv: i64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut watch = WatchEvents::open(
        cluster.port,
        &format!("{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"),
    );
    let later = create(&mut http, "later");
    let later_rv: i64 = later["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let added = watch.next(PATIENCE).expect("the ADDED event of 'later'");
    assert_eq!(
        (
            added["type"].as_str(),
            added["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("later"))
    );
    let bookmark = watch.next(PATIENCE).expect("a periodic BOOKMARK");
    assert_eq!(bookmark["type"], "BOOKMARK", "{bookmark}");
    let at: i64 = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        at >= later_rv,
        "bookmark at {at}, behind the write at {later_rv}"
    );
    assert_eq!(bookmark["object"]["kind"], "ConfigMap", "{bookmark}");
}
