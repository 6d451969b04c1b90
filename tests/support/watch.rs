//! Driving `etcd-client` watch streams with deadlines.

use std::time::Duration;

use etcd_client::{Client, Event, EventType, WatchOptions, WatchResponse, WatchStream};

/// How long a test waits for a watch response that should come.
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The next response on `stream`; panics if none comes in time or the
/// stream ends.
pub async fn next_response(stream: &mut WatchStream) -> WatchResponse {
    super::watchdog::waiting_for("a watch response");
    match tokio::time::timeout(WATCH_TIMEOUT, stream.message()).await {
        Ok(Ok(Some(response))) => response,
        Ok(Ok(None)) => panic!("the watch stream ended"),
        Ok(Err(err)) => panic!("the watch stream failed: {err}"),
        Err(_) => panic!("no watch response within {WATCH_TIMEOUT:?}"),
    }
}

/// A response that arrives within `wait`, if any.
pub async fn response_within(stream: &mut WatchStream, wait: Duration) -> Option<WatchResponse> {
    match tokio::time::timeout(wait, stream.message()).await {
        Ok(Ok(response)) => response,
        Ok(Err(err)) => panic!("the watch stream failed: {err}"),
        Err(_) => None,
    }
}

/// Opens a watch stream with one watch; returns the stream and the id the
/// server acknowledged it with.
pub async fn open_watch(
    client: &mut Client,
    key: &str,
    options: WatchOptions,
) -> (WatchStream, i64) {
    let mut stream = client
        .watch(key, Some(options))
        .await
        .expect("open a watch stream");
    let created = next_response(&mut stream).await;
    assert!(
        created.created(),
        "first response acknowledges the watch: {created:?}"
    );
    assert!(!created.canceled(), "watch refused: {created:?}");
    (stream, created.watch_id())
}

/// Adds one more watch to an open stream and waits for its acknowledgement.
/// Only call it while no events are due on the stream's other watches.
pub async fn add_watch(stream: &mut WatchStream, key: &str, options: WatchOptions) -> i64 {
    stream
        .watch(key, Some(options))
        .await
        .expect("send a watch request");
    let created = next_response(stream).await;
    assert!(
        created.created(),
        "expected the creation response, got {created:?}"
    );
    assert!(!created.canceled(), "watch refused: {created:?}");
    created.watch_id()
}

/// Reads responses until `count` events arrived for `watch_id`; panics on
/// events of other watches.
pub async fn events_of(stream: &mut WatchStream, watch_id: i64, count: usize) -> Vec<Event> {
    let mut events = Vec::new();
    while events.len() < count {
        let response = next_response(stream).await;
        assert_eq!(
            response.watch_id(),
            watch_id,
            "unexpected response {response:?}"
        );
        assert!(!response.canceled(), "watch canceled: {response:?}");
        events.extend(response.events().iter().cloned());
    }
    assert_eq!(events.len(), count, "more events than expected: {events:?}");
    events
}

/// An event as (type, key, value, mod_revision), for comparisons.
pub fn summary(event: &Event) -> (EventType, String, String, i64) {
    let kv = event.kv().expect("an event has a kv");
    (
        event.event_type(),
        String::from_utf8_lossy(kv.key()).into_owned(),
        String::from_utf8_lossy(kv.value()).into_owned(),
        kv.mod_revision(),
    )
}
