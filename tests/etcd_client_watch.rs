//! The `etcd-client` crate against a real `capstan-store` process:
//! watches (several on a stream, filters, progress, cancel, history,
//! compaction, future revisions, concurrent writers, slow readers).

use std::time::{Duration, Instant};

use capstan_tests::client::{connect, current_revision, put, start_store as start};
use capstan_tests::store::TempStore;
use capstan_tests::watch::{
    add_watch, events_of, next_response, open_watch, response_within, summary,
};
use etcd_client::{Client, EventType, Txn, TxnOp, WatchFilterType, WatchOptions};

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
