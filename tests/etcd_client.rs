//! The `etcd-client` crate against a real `capstan-store` process: range
//! options, txns, watches, leases and maintenance.

use std::time::{Duration, Instant};

use capstan_tests::client::{assert_grpc_error, connect, current_revision};
use capstan_tests::keyspace::read_keyspace;
use capstan_tests::poll::wait_for_async;
use capstan_tests::store::TempStore;
use capstan_tests::watch::{
    add_watch, events_of, next_response, open_watch, response_within, summary,
};
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, EventType, GetOptions, LeaseGrantOptions,
    LeaseTimeToLiveOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
    WatchFilterType, WatchOptions,
};
use tonic::Code;

async fn start() -> (TempStore, Client) {
    let store = TempStore::start(&[]);
    let client = connect(&store).await;
    (store, client)
}

/// Puts `key = value`; returns the revision of the put.
async fn put(client: &mut Client, key: &str, value: &str) -> i64 {
    let response = client.put(key, value, None).await.expect("put");
    response.header().expect("header").revision()
}

async fn keys(client: &mut Client, key: &str, options: GetOptions) -> Vec<String> {
    let response = client.get(key, Some(options)).await.expect("get");
    response
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap().to_string())
        .collect()
}

/// r/a: create 2, mod 5, version 2; r/b: 3/3; r/c: 4/4; r/d: 6/6.
async fn fill_range_fixture(client: &mut Client) {
    for (key, value) in [
        ("r/a", "1"),
        ("r/b", "2"),
        ("r/c", "3"),
        ("r/a", "4"),
        ("r/d", "5"),
    ] {
        put(client, key, value).await;
    }
    put(client, "s", "outside").await; // rev 7
}

#[tokio::test]
async fn range_count_only_returns_the_count_and_no_kvs() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .get(
            "r/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(response.count(), 4);
    assert!(response.kvs().is_empty(), "{:?}", response.kvs());
    assert!(!response.more());
    let none = client
        .get(
            "x/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(none.count(), 0);
}

#[tokio::test]
async fn range_keys_only_keeps_metadata_and_drops_values() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .get("r/", Some(GetOptions::new().with_prefix().with_keys_only()))
        .await
        .unwrap();
    assert_eq!(response.kvs().len(), 4);
    let a = &response.kvs()[0];
    assert_eq!((a.key(), a.value()), (&b"r/a"[..], &b""[..]));
    assert_eq!(
        (a.create_revision(), a.mod_revision(), a.version()),
        (2, 5, 2)
    );
}

#[tokio::test]
async fn range_limit_sets_more_and_sort_applies_before_the_limit() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let limited = client
        .get("r/", Some(GetOptions::new().with_prefix().with_limit(2)))
        .await
        .unwrap();
    let names: Vec<_> = limited
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap())
        .collect();
    assert_eq!(names, ["r/a", "r/b"]);
    assert!(limited.more());
    assert_eq!(limited.count(), 4);
    let exact = client
        .get("r/", Some(GetOptions::new().with_prefix().with_limit(4)))
        .await
        .unwrap();
    assert!(!exact.more(), "a limit equal to the count cuts nothing off");
    let sorted = |target, order| GetOptions::new().with_prefix().with_sort(target, order);
    let newest = sorted(SortTarget::Mod, SortOrder::Descend).with_limit(2);
    assert_eq!(keys(&mut client, "r/", newest).await, ["r/d", "r/a"]);
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Create, SortOrder::Ascend)
        )
        .await,
        ["r/a", "r/b", "r/c", "r/d"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Value, SortOrder::Descend)
        )
        .await,
        ["r/d", "r/a", "r/c", "r/b"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Key, SortOrder::Descend)
        )
        .await,
        ["r/d", "r/c", "r/b", "r/a"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Version, SortOrder::Descend)
        )
        .await[0],
        "r/a"
    );
}

#[tokio::test]
async fn range_min_max_mod_and_create_revision_filters() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let prefix = || GetOptions::new().with_prefix();
    assert_eq!(
        keys(&mut client, "r/", prefix().with_min_mod_revision(4)).await,
        ["r/a", "r/c", "r/d"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_max_mod_revision(4)).await,
        ["r/b", "r/c"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_min_create_revision(4)).await,
        ["r/c", "r/d"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_max_create_revision(3)).await,
        ["r/a", "r/b"]
    );
    let window = prefix().with_min_mod_revision(4).with_max_mod_revision(5);
    assert_eq!(keys(&mut client, "r/", window).await, ["r/a", "r/c"]);
    // At an old revision the filters see that revision's metadata.
    let old = prefix().with_revision(4).with_max_mod_revision(3);
    assert_eq!(keys(&mut client, "r/", old).await, ["r/a", "r/b"]);
}

#[tokio::test]
async fn range_from_key_explicit_end_and_serializable() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    assert_eq!(
        keys(&mut client, "r/c", GetOptions::new().with_from_key()).await,
        ["r/c", "r/d", "s"]
    );
    assert_eq!(
        keys(&mut client, "r/b", GetOptions::new().with_range("r/d")).await,
        ["r/b", "r/c"]
    );
    let all = GetOptions::new().with_all_keys().with_serializable();
    assert_eq!(
        keys(&mut client, "", all).await,
        ["r/a", "r/b", "r/c", "r/d", "s"]
    );
    let response = client
        .get("r/a", Some(GetOptions::new().with_revision(3)))
        .await
        .unwrap();
    assert_eq!(response.kvs()[0].value(), b"1");
    assert_eq!(
        response.header().unwrap().revision(),
        7,
        "the header has the current revision"
    );
}

#[tokio::test]
async fn txn_compares_every_target_and_runs_nested_ops_in_one_revision() {
    let (_store, mut client) = start().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    client
        .put("x", "1", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap(); // rev 2
    put(&mut client, "y", "a").await; // rev 3
    put(&mut client, "y", "b").await; // rev 4
    let nested = Txn::new()
        .when([Compare::value("y", CompareOp::Equal, "b")])
        .and_then([TxnOp::put("n1", "ran", None)])
        .or_else([TxnOp::put("n2", "wrong", None)]);
    let txn = Txn::new()
        .when([
            Compare::value("x", CompareOp::Equal, "1"),
            Compare::value("y", CompareOp::NotEqual, "a"),
            Compare::version("y", CompareOp::Equal, 2),
            Compare::version("y", CompareOp::Greater, 1),
            Compare::create_revision("y", CompareOp::Equal, 3),
            Compare::create_revision("x", CompareOp::Less, 3),
            Compare::mod_revision("y", CompareOp::Equal, 4),
            Compare::mod_revision("missing", CompareOp::Equal, 0),
            Compare::lease("x", CompareOp::Equal, lease),
            Compare::lease("y", CompareOp::Equal, 0),
        ])
        .and_then([
            TxnOp::put("z", "1", None),
            TxnOp::get("z", None),
            TxnOp::delete("x", None),
            TxnOp::txn(nested),
        ])
        .or_else([TxnOp::put("failed", "1", None)]);
    let response = client.txn(txn).await.unwrap();
    assert!(response.succeeded());
    assert_eq!(
        response.header().unwrap().revision(),
        5,
        "the whole txn is one revision"
    );
    let ops = response.op_responses();
    assert_eq!(ops.len(), 4);
    let TxnOpResponse::Get(get) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    assert_eq!(
        get.kvs()[0].mod_revision(),
        5,
        "a read in a txn sees the txn's earlier put"
    );
    let TxnOpResponse::Delete(deleted) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    assert_eq!(deleted.deleted(), 1);
    let TxnOpResponse::Txn(inner) = &ops[3] else {
        panic!("{:?}", ops[3])
    };
    assert!(inner.succeeded());
    for key in ["z", "n1"] {
        let got = client.get(key, None).await.unwrap();
        assert_eq!(got.kvs()[0].mod_revision(), 5, "{key}");
    }
    for key in ["x", "n2", "failed"] {
        assert!(
            client.get(key, None).await.unwrap().kvs().is_empty(),
            "{key} must not exist"
        );
    }
    assert_eq!(current_revision(&mut client).await, 5);
}

#[tokio::test]
async fn txn_failure_branch_runs_when_one_compare_fails() {
    let (_store, mut client) = start().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    put(&mut client, "y", "a").await; // rev 2
    put(&mut client, "z", "1").await; // rev 3
    let nested = Txn::new()
        .when([Compare::value("z", CompareOp::Equal, "1")])
        .and_then([TxnOp::delete("z", None)])
        .or_else([TxnOp::put("w", "wrong", None)]);
    let txn = Txn::new()
        .when([
            Compare::value("y", CompareOp::Equal, "a"),
            Compare::lease("y", CompareOp::Equal, lease),
        ])
        .and_then([TxnOp::put("y", "changed", None)])
        .or_else([
            TxnOp::put("f", "1", None),
            TxnOp::txn(nested),
            TxnOp::get("y", None),
        ]);
    let response = client.txn(txn).await.unwrap();
    assert!(!response.succeeded());
    assert_eq!(response.header().unwrap().revision(), 4);
    let ops = response.op_responses();
    let TxnOpResponse::Txn(inner) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    assert!(inner.succeeded());
    let TxnOpResponse::Get(get) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    assert_eq!(get.kvs()[0].value(), b"a");
    let f = client.get("f", None).await.unwrap();
    assert_eq!(f.kvs()[0].mod_revision(), 4);
    assert!(
        client.get("z", None).await.unwrap().kvs().is_empty(),
        "nested delete ran"
    );
    assert!(client.get("w", None).await.unwrap().kvs().is_empty());
    let z_before = client
        .get("z", Some(GetOptions::new().with_revision(3)))
        .await
        .unwrap();
    assert_eq!(z_before.kvs()[0].value(), b"1");
    // A value compare on a missing key is false; other targets see zero.
    let missing = Txn::new().when([Compare::value("nope", CompareOp::Equal, "")]);
    assert!(!client.txn(missing).await.unwrap().succeeded());
    let zero = Txn::new().when([
        Compare::version("nope", CompareOp::Equal, 0),
        Compare::create_revision("nope", CompareOp::Equal, 0),
    ]);
    assert!(client.txn(zero).await.unwrap().succeeded());
    assert_eq!(
        current_revision(&mut client).await,
        4,
        "read-only txns are not writes"
    );
}

#[tokio::test]
async fn txn_compare_with_a_range_must_hold_for_every_key() {
    let (_store, mut client) = start().await;
    put(&mut client, "p/1", "v").await;
    put(&mut client, "p/2", "v").await;
    put(&mut client, "p/2", "v").await;
    let all_exist = Compare::version("p/", CompareOp::Greater, 0).with_prefix();
    assert!(client
        .txn(Txn::new().when([all_exist]))
        .await
        .unwrap()
        .succeeded());
    let all_first = Compare::version("p/", CompareOp::Equal, 1).with_prefix();
    assert!(!client
        .txn(Txn::new().when([all_first]))
        .await
        .unwrap()
        .succeeded());
    let ranged = Compare::version("p/1", CompareOp::Equal, 1).with_range("p/2");
    assert!(client
        .txn(Txn::new().when([ranged]))
        .await
        .unwrap()
        .succeeded());
}

#[tokio::test]
async fn put_prev_kv_ignore_value_and_ignore_lease() {
    let (_store, mut client) = start().await;
    let first = client
        .put("k", "v1", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert!(first.prev_key().is_none(), "a create has no previous kv");
    let lease = client.lease_grant(60, None).await.unwrap().id();
    let second = client
        .put(
            "k",
            "v2",
            Some(PutOptions::new().with_prev_key().with_lease(lease)),
        )
        .await
        .unwrap();
    let prev = second.prev_key().expect("prev kv");
    assert_eq!(
        (
            prev.value(),
            prev.mod_revision(),
            prev.version(),
            prev.lease()
        ),
        (&b"v1"[..], 2, 1, 0)
    );
    let kept_value = client
        .put(
            "k",
            "",
            Some(PutOptions::new().with_ignore_value().with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(
        kept_value.header().unwrap().revision(),
        4,
        "ignore_value is still a write"
    );
    assert_eq!(kept_value.prev_key().unwrap().value(), b"v2");
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    // The value is kept; the lease comes from the request (none) as in etcd.
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v2"[..], 3, 4, 0)
    );
    client
        .put("k", "v3", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap(); // rev 5
    client
        .put("k", "v4", Some(PutOptions::new().with_ignore_lease()))
        .await
        .unwrap(); // rev 6
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v4"[..], 5, 6, lease)
    );
    let both = PutOptions::new().with_ignore_value().with_ignore_lease();
    client.put("k", "", Some(both)).await.unwrap(); // rev 7
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v4"[..], 6, 7, lease)
    );
    client.put("k", "v5", None).await.unwrap();
    assert_eq!(
        client.get("k", None).await.unwrap().kvs()[0].lease(),
        0,
        "a plain put detaches the lease"
    );
}

#[tokio::test]
async fn delete_range_prev_kv_returns_the_deleted_pairs() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .delete(
            "r/b",
            Some(DeleteOptions::new().with_range("r/d").with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(response.deleted(), 2);
    assert_eq!(response.header().unwrap().revision(), 8);
    let prev: Vec<_> = response
        .prev_kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap(),
                kv.value_str().unwrap(),
                kv.mod_revision(),
            )
        })
        .collect();
    assert_eq!(prev, [("r/b", "2", 3), ("r/c", "3", 4)]);
    assert_eq!(
        keys(&mut client, "r/", GetOptions::new().with_prefix()).await,
        ["r/a", "r/d"]
    );
    let plain = client.delete("r/a", None).await.unwrap();
    assert_eq!(plain.deleted(), 1);
    assert!(plain.prev_kvs().is_empty(), "no prev kvs unless asked");
    let nothing = client
        .delete("r/zz", Some(DeleteOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!(
        (nothing.deleted(), nothing.header().unwrap().revision()),
        (0, 9)
    );
}

#[tokio::test]
async fn several_watches_on_one_stream_get_their_own_events() {
    let (_store, mut client) = start().await;
    let (mut stream, exact) = open_watch(&mut client, "a", WatchOptions::new()).await;
    let prefix = add_watch(&mut stream, "b/", WatchOptions::new().with_prefix()).await;
    let range = add_watch(&mut stream, "c", WatchOptions::new().with_range("e")).await;
    assert!(
        exact != prefix && prefix != range && exact != range,
        "ids {exact} {prefix} {range}"
    );
    put(&mut client, "b/1", "x").await; // rev 2
    assert_eq!(
        summary(&events_of(&mut stream, prefix, 1).await[0]),
        (EventType::Put, "b/1".into(), "x".into(), 2)
    );
    put(&mut client, "ab", "no watcher").await;
    put(&mut client, "d", "y").await; // rev 4
    assert_eq!(
        summary(&events_of(&mut stream, range, 1).await[0]),
        (EventType::Put, "d".into(), "y".into(), 4)
    );
    put(&mut client, "a", "z").await; // rev 5
    assert_eq!(
        summary(&events_of(&mut stream, exact, 1).await[0]),
        (EventType::Put, "a".into(), "z".into(), 5)
    );
    assert!(response_within(&mut stream, Duration::from_millis(300))
        .await
        .is_none());
}

#[tokio::test]
async fn watch_prev_kv_and_filters() {
    let (_store, mut client) = start().await;
    put(&mut client, "k", "old").await; // rev 2
    let (mut stream, with_prev) =
        open_watch(&mut client, "k", WatchOptions::new().with_prev_key()).await;
    let no_put = add_watch(
        &mut stream,
        "k",
        WatchOptions::new().with_filters([WatchFilterType::NoPut]),
    )
    .await;
    let no_delete = add_watch(
        &mut stream,
        "k",
        WatchOptions::new().with_filters([WatchFilterType::NoDelete]),
    )
    .await;
    put(&mut client, "k", "new").await; // rev 3
    client.delete("k", None).await.unwrap(); // rev 4
    let mut seen = std::collections::HashMap::<i64, Vec<_>>::new();
    while seen.values().map(Vec::len).sum::<usize>() < 4 {
        let response = next_response(&mut stream).await;
        for event in response.events() {
            let prev = event
                .prev_kv()
                .map(|kv| (kv.value_str().unwrap().to_string(), kv.mod_revision()));
            seen.entry(response.watch_id())
                .or_default()
                .push((summary(event), prev));
        }
    }
    let put_event = (EventType::Put, "k".to_string(), "new".to_string(), 3);
    let delete_event = (EventType::Delete, "k".to_string(), String::new(), 4);
    assert_eq!(
        seen[&with_prev],
        [
            (put_event.clone(), Some(("old".into(), 2))),
            (delete_event.clone(), Some(("new".into(), 3)))
        ]
    );
    assert_eq!(seen[&no_put], [(delete_event, None)]);
    assert_eq!(seen[&no_delete], [(put_event, None)]);
    assert!(response_within(&mut stream, Duration::from_millis(300))
        .await
        .is_none());
}

/// With `progress_notify`, an idle watch gets empty responses of its own
/// at the server's interval, carrying the current revision (etcd 3.4 calls
/// the interval flag experimental; the support code spells it for each).
#[tokio::test]
async fn an_idle_watch_with_progress_notify_gets_progress_notifications() {
    let store = TempStore::start(&["--watch-progress-notify-interval", "500ms"]);
    let mut client = connect(&store).await;
    let options = WatchOptions::new().with_progress_notify();
    let (mut stream, id) = open_watch(&mut client, "quiet", options).await;
    let revision = put(&mut client, "elsewhere", "1").await;
    // Notifications from before the put may come first; a bounded number.
    for _ in 0..40 {
        let progress = next_response(&mut stream).await;
        assert!(progress.events().is_empty(), "{progress:?}");
        assert!(!progress.created() && !progress.canceled(), "{progress:?}");
        assert_eq!(progress.watch_id(), id, "{progress:?}");
        if progress.header().expect("a header").revision() >= revision {
            return;
        }
    }
    panic!("40 progress notifications and none at revision {revision}");
}

#[tokio::test]
async fn watch_progress_request_reports_the_current_revision() {
    let (_store, mut client) = start().await;
    let (mut stream, id) = open_watch(&mut client, "watched", WatchOptions::new()).await;
    put(&mut client, "elsewhere", "1").await;
    let revision = put(&mut client, "elsewhere", "2").await;
    stream.request_progress().await.unwrap();
    let progress = next_response(&mut stream).await;
    assert!(progress.events().is_empty(), "{progress:?}");
    assert!(!progress.created() && !progress.canceled(), "{progress:?}");
    assert_eq!(
        progress.header().unwrap().revision(),
        revision,
        "{progress:?}"
    );
    assert_ne!(id, -1, "a real watch has an id of its own");
    assert_eq!(
        progress.watch_id(),
        -1,
        "progress is for the whole stream (id -1): {progress:?}"
    );
}

#[tokio::test]
async fn canceled_watch_gets_no_more_events() {
    let (_store, mut client) = start().await;
    let (mut stream, canceled) = open_watch(&mut client, "k", WatchOptions::new()).await;
    let kept = add_watch(&mut stream, "k", WatchOptions::new()).await;
    stream.cancel(canceled).await.unwrap();
    let response = next_response(&mut stream).await;
    assert!(response.canceled(), "{response:?}");
    assert_eq!(response.watch_id(), canceled);
    for value in ["1", "2"] {
        let revision = put(&mut client, "k", value).await;
        let events = events_of(&mut stream, kept, 1).await;
        assert_eq!(summary(&events[0]).3, revision);
    }
    assert!(response_within(&mut stream, Duration::from_millis(300))
        .await
        .is_none());
}

#[tokio::test]
async fn watch_from_an_old_revision_replays_history_in_order() {
    let (_store, mut client) = start().await;
    put(&mut client, "h/a", "1").await; // 2
    put(&mut client, "h/b", "1").await; // 3
    put(&mut client, "h/a", "2").await; // 4
    client.delete("h/b", None).await.unwrap(); // 5
    let both = Txn::new().and_then([TxnOp::put("h/c", "1", None), TxnOp::put("h/d", "1", None)]);
    client.txn(both).await.unwrap(); // 6: two events in one response
    let options = WatchOptions::new().with_prefix().with_start_revision(3);
    let (mut stream, id) = open_watch(&mut client, "h/", options).await;
    let mut events = Vec::new();
    while events.len() < 5 {
        let response = next_response(&mut stream).await;
        assert_eq!(response.watch_id(), id);
        let revisions: Vec<_> = response.events().iter().map(|e| summary(e).3).collect();
        if revisions.contains(&6) {
            assert_eq!(
                revisions.iter().filter(|&&r| r == 6).count(),
                2,
                "a revision is never split"
            );
        }
        events.extend(response.events().iter().map(summary));
    }
    let expected = [
        (EventType::Put, "h/b", "1", 3),
        (EventType::Put, "h/a", "2", 4),
        (EventType::Delete, "h/b", "", 5),
        (EventType::Put, "h/c", "1", 6),
        (EventType::Put, "h/d", "1", 6),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(t, k, v, r)| (*t, k.to_string(), v.to_string(), *r))
        .collect();
    assert_eq!(events, expected);
    put(&mut client, "h/a", "live").await;
    assert_eq!(
        summary(&events_of(&mut stream, id, 1).await[0]),
        (EventType::Put, "h/a".into(), "live".into(), 7)
    );
}

#[tokio::test]
async fn watch_on_a_compacted_revision_is_canceled_with_the_compact_revision() {
    let (_store, mut client) = start().await;
    for value in ["1", "2", "3", "4"] {
        put(&mut client, "c", value).await; // 2..=5
    }
    client.compact(4, None).await.unwrap();
    let mut stream = client
        .watch("c", Some(WatchOptions::new().with_start_revision(2)))
        .await
        .unwrap();
    let canceled = loop {
        let response = next_response(&mut stream).await;
        assert!(
            response.events().is_empty(),
            "no events from compacted history: {response:?}"
        );
        if response.canceled() {
            break response;
        }
        assert!(response.created(), "{response:?}");
    };
    assert_eq!(canceled.compact_revision(), 4, "{canceled:?}");
    let ok = WatchOptions::new().with_start_revision(4);
    let (mut stream, id) = open_watch(&mut client, "c", ok).await;
    let events = events_of(&mut stream, id, 2).await;
    let revisions: Vec<_> = events.iter().map(|e| summary(e).3).collect();
    assert_eq!(revisions, [4, 5]);
}

/// Starts `writers` tasks that each put `puts` values (0, 1, ...) over ten
/// keys under `load/<writer>/`.
fn spawn_writers(client: &Client, writers: usize, puts: usize) -> Vec<tokio::task::JoinHandle<()>> {
    (0..writers)
        .map(|writer| {
            let mut client = client.clone();
            tokio::spawn(async move {
                for i in 0..puts {
                    let key = format!("load/{writer}/{}", i % 10);
                    client.put(key, i.to_string(), None).await.expect("put");
                }
            })
        })
        .collect()
}

/// The events of [`spawn_writers`]' puts came once each, in revision order
/// from `start_revision`, and each writer's puts in its own order.
fn check_load_events(
    events: &[etcd_client::Event],
    start_revision: i64,
    writers: usize,
    puts: usize,
) {
    let revisions: Vec<i64> = events.iter().map(|e| summary(e).3).collect();
    let expected: Vec<i64> = (start_revision..start_revision + (writers * puts) as i64).collect();
    assert!(
        revisions == expected,
        "events out of order, duplicated or missing: {} events, first {:?}, last {:?}",
        revisions.len(),
        revisions.first(),
        revisions.last()
    );
    for writer in 0..writers {
        let values: Vec<String> = events
            .iter()
            .map(summary)
            .filter(|(_, key, _, _)| key.starts_with(&format!("load/{writer}/")))
            .map(|(_, _, value, _)| value)
            .collect();
        let expected: Vec<String> = (0..puts).map(|i| i.to_string()).collect();
        assert_eq!(values, expected, "writer {writer}'s puts in its own order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_delivers_every_event_in_order_under_concurrent_writers() {
    const WRITERS: usize = 3;
    const PUTS: usize = 150;
    let (_store, mut client) = start().await;
    let start_revision = current_revision(&mut client).await + 1;
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(start_revision);
    let (mut stream, id) = open_watch(&mut client, "load/", options).await;
    let writers = spawn_writers(&client, WRITERS, PUTS);
    let started = Instant::now();
    let events = events_of(&mut stream, id, WRITERS * PUTS).await;
    for writer in writers {
        writer.await.unwrap();
    }
    eprintln!("{} events in {:?}", events.len(), started.elapsed());
    check_load_events(&events, start_revision, WRITERS, PUTS);
    let last = start_revision + (WRITERS * PUTS) as i64 - 1;
    assert_eq!(current_revision(&mut client).await, last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_that_falls_behind_still_gets_every_event_in_order() {
    const WRITERS: usize = 8;
    const PUTS: usize = 250;
    let (_store, mut client) = start().await;
    let start_revision = current_revision(&mut client).await + 1;
    let (mut stream, id) =
        open_watch(&mut client, "load/", WatchOptions::new().with_prefix()).await;
    let started = Instant::now();
    // Nobody reads the stream while 2,000 events pile up behind it.
    for writer in spawn_writers(&client, WRITERS, PUTS) {
        writer.await.unwrap();
    }
    let written = started.elapsed();
    let events = events_of(&mut stream, id, WRITERS * PUTS).await;
    eprintln!(
        "{} puts in {written:?}, then read in {:?}",
        events.len(),
        started.elapsed() - written
    );
    check_load_events(&events, start_revision, WRITERS, PUTS);
    assert!(response_within(&mut stream, Duration::from_millis(300))
        .await
        .is_none());
}

#[tokio::test]
async fn lease_grant_with_and_without_an_id() {
    let (_store, mut client) = start().await;
    let chosen = client
        .lease_grant(30, Some(LeaseGrantOptions::new().with_id(0x1234)))
        .await
        .unwrap();
    assert_eq!((chosen.id(), chosen.ttl()), (0x1234, 30));
    let picked = client.lease_grant(30, None).await.unwrap();
    assert!(
        picked.id() > 0 && picked.id() != 0x1234,
        "server-picked id {}",
        picked.id()
    );
    let short = client.lease_grant(1, None).await.unwrap();
    assert_eq!(short.ttl(), 2, "TTL is raised to the 2 s minimum");
    let again = client
        .lease_grant(30, Some(LeaseGrantOptions::new().with_id(0x1234)))
        .await;
    assert_grpc_error(
        again,
        Code::FailedPrecondition,
        "etcdserver: lease already exists",
    );
    let mut ids: Vec<i64> = client
        .leases()
        .await
        .unwrap()
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    ids.sort();
    let mut expected = vec![0x1234, picked.id(), short.id()];
    expected.sort();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn lease_keep_alive_stream_keeps_keys_past_the_ttl() {
    let (_store, mut client) = start().await;
    let id = client.lease_grant(2, None).await.unwrap().id();
    client
        .put("kept", "v", Some(PutOptions::new().with_lease(id)))
        .await
        .unwrap();
    let (mut keeper, mut responses) = client.lease_keep_alive(id).await.unwrap();
    // Seven renewals half a second apart: the key outlives its 2 s TTL.
    for _ in 0..7 {
        keeper.keep_alive().await.unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), responses.message())
            .await
            .expect("keep-alive answered")
            .unwrap()
            .expect("keep-alive stream open");
        assert_eq!((response.id(), response.ttl()), (id, 2));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        client.get("kept", None).await.unwrap().kvs().len(),
        1,
        "kept alive past its TTL"
    );
    let before_expiry = current_revision(&mut client).await;
    let (mut watch, watch_id) = open_watch(&mut client, "kept", WatchOptions::new()).await;
    drop(keeper);
    drop(responses);
    wait_for_async(Duration::from_secs(10), "the key to expire", || {
        let mut client = client.clone();
        async move {
            client
                .get("kept", None)
                .await
                .unwrap()
                .kvs()
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert_eq!(client.lease_time_to_live(id, None).await.unwrap().ttl(), -1);
    // Expiry is a replicated delete: one new revision and a DELETE event.
    let expired = events_of(&mut watch, watch_id, 1).await;
    assert_eq!(
        summary(&expired[0]),
        (
            EventType::Delete,
            "kept".into(),
            String::new(),
            before_expiry + 1
        )
    );
    assert_eq!(current_revision(&mut client).await, before_expiry + 1);
}

#[tokio::test]
async fn lease_time_to_live_lists_attached_keys() {
    let (_store, mut client) = start().await;
    let granted_at = Instant::now();
    let id = client.lease_grant(60, None).await.unwrap().id();
    for key in ["t/2", "t/1"] {
        client
            .put(key, "v", Some(PutOptions::new().with_lease(id)))
            .await
            .unwrap();
    }
    let info = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!((info.id(), info.granted_ttl()), (id, 60));
    // No more than the time since the grant has run off (plus rounding).
    let lowest = 60 - granted_at.elapsed().as_secs() as i64 - 1;
    assert!(
        (lowest..=60).contains(&info.ttl()),
        "remaining {} with at least {lowest} due",
        info.ttl()
    );
    let mut keys = info.keys().to_vec();
    keys.sort();
    assert_eq!(keys, [b"t/1".to_vec(), b"t/2".to_vec()]);
    let without = client.lease_time_to_live(id, None).await.unwrap();
    assert!(without.keys().is_empty(), "keys only on request");
    client.put("t/1", "detached", None).await.unwrap();
    let after = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert_eq!(
        after.keys(),
        [b"t/2".to_vec()],
        "a plain put detaches the key"
    );
    client.delete("t/2", None).await.unwrap();
    let deleted = client
        .lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys()))
        .await
        .unwrap();
    assert!(deleted.keys().is_empty(), "a deleted key leaves its lease");
    assert_eq!(deleted.granted_ttl(), 60, "the lease itself stays");
    let missing = client.lease_time_to_live(0x7777, None).await.unwrap();
    assert_eq!(missing.ttl(), -1, "an unknown lease has TTL -1");
}

#[tokio::test]
async fn watch_from_a_future_revision_waits_for_it() {
    let (_store, mut client) = start().await;
    let future = current_revision(&mut client).await + 3;
    let options = WatchOptions::new().with_start_revision(future);
    let (mut stream, id) = open_watch(&mut client, "f", options).await;
    for value in ["1", "2", "3", "4"] {
        put(&mut client, "f", value).await;
    }
    let events: Vec<_> = events_of(&mut stream, id, 2)
        .await
        .iter()
        .map(summary)
        .collect();
    assert_eq!(
        events,
        [
            (EventType::Put, "f".into(), "3".into(), future),
            (EventType::Put, "f".into(), "4".into(), future + 1)
        ]
    );
}

#[tokio::test]
async fn lease_revoke_deletes_every_attached_key_in_one_revision() {
    let (_store, mut client) = start().await;
    let id = client.lease_grant(60, None).await.unwrap().id();
    for key in ["l/a", "l/b", "l/c"] {
        client
            .put(key, "v", Some(PutOptions::new().with_lease(id)))
            .await
            .unwrap();
    }
    put(&mut client, "l/plain", "v").await;
    let before = current_revision(&mut client).await;
    let (mut stream, watch) =
        open_watch(&mut client, "l/", WatchOptions::new().with_prefix()).await;
    let revoked = client.lease_revoke(id).await.unwrap();
    assert_eq!(revoked.header().unwrap().revision(), before + 1);
    let events: Vec<_> = events_of(&mut stream, watch, 3)
        .await
        .iter()
        .map(summary)
        .collect();
    let expected: Vec<_> = ["l/a", "l/b", "l/c"]
        .iter()
        .map(|k| (EventType::Delete, k.to_string(), String::new(), before + 1))
        .collect();
    let mut sorted = events.clone();
    sorted.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(sorted, expected);
    assert_eq!(
        keys(&mut client, "l/", GetOptions::new().with_prefix()).await,
        ["l/plain"]
    );
    assert!(client.leases().await.unwrap().leases().is_empty());
}

#[tokio::test]
async fn maintenance_status_and_hash_kv_survive_a_restart() {
    let (mut store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    client.delete("r/b", None).await.unwrap(); // 8
    client.compact(5, None).await.unwrap();
    let status = client.status().await.unwrap();
    let member = status.header().unwrap().member_id();
    assert_eq!(status.leader(), member, "a single member leads itself");
    assert_eq!(status.header().unwrap().revision(), 8);
    assert!(
        status.raft_index() >= 8 && status.raft_term() >= 1,
        "{status:?}"
    );
    assert!(
        status.db_size() > 0 && !status.version().is_empty(),
        "{status:?}"
    );
    let hash = client.hash_kv(0).await.unwrap();
    assert_eq!(hash.header().unwrap().revision(), 8);
    assert_eq!(hash.compact_version(), 5);
    let at_seven = client.hash_kv(7).await.unwrap();
    assert_ne!(
        at_seven.hash(),
        hash.hash(),
        "the hash covers the delete at revision 8"
    );
    let keyspace = read_keyspace(&mut client).await;
    store.restart();
    let mut client = connect(&store).await;
    let after = client.hash_kv(0).await.unwrap();
    assert_eq!((after.hash(), after.compact_version()), (hash.hash(), 5));
    assert_eq!(after.header().unwrap().revision(), 8);
    assert_eq!(client.hash_kv(7).await.unwrap().hash(), at_seven.hash());
    assert_eq!(read_keyspace(&mut client).await, keyspace);
    let status = client.status().await.unwrap();
    assert_eq!(status.leader(), status.header().unwrap().member_id());
    assert_eq!(
        client.member_list().await.unwrap().members()[0].id(),
        member,
        "same member id after restart"
    );
}
