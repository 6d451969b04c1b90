//! A watch as an HTTP response: newline-delimited JSON events over a
//! chunked 200, flushed one by one, ended by `timeoutSeconds`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix_web::HttpResponse;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::chain::watch_quota::WatchSlot;
use super::render::{self, Form};
use crate::cache::{EventType, WatchItem};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::registry::Strategy;

/// Without `timeoutSeconds` a watch still ends eventually, as
/// kube-apiserver's min-request-timeout makes it (clients re-watch).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Keeps the open-watch gauge and the user's watch count right however
/// the stream ends.
struct Open {
    metrics: Arc<Metrics>,
    /// Held, not read: dropping it frees the user's slot.
    _slot: WatchSlot,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics.watches.dec();
    }
}

pub fn respond(
    receiver: Result<mpsc::Receiver<WatchItem>, ApiError>,
    strategy: Arc<dyn Strategy>,
    form: Form,
    timeout: Option<Duration>,
    metrics: Arc<Metrics>,
    slot: WatchSlot,
) -> HttpResponse {
    let receiver = match receiver {
        Ok(receiver) => receiver,
        // A watch that cannot start is still a 200 stream: one ERROR event.
        Err(err) => {
            let line = line(&json!({"type": "ERROR", "object": err.status()}));
            return HttpResponse::Ok()
                .content_type("application/json")
                .body(line);
        }
    };
    metrics.watches.inc();
    let open = Open {
        metrics,
        _slot: slot,
    };
    let state = (receiver, true, open);
    let events = futures::stream::unfold(state, move |(mut receiver, first, open)| {
        let strategy = strategy.clone();
        async move {
            let item = loop {
                let item = receiver.recv().await?;
                if !dropped_by_failpoint(&item) {
                    break item;
                }
            };
            let object = event_object(strategy.as_ref(), form, &item, first);
            let headers_sent =
                first && item.kind != EventType::Bookmark && item.kind != EventType::Error;
            let bytes = line(&json!({"type": item.kind.as_str(), "object": object}));
            Some((
                Ok::<_, actix_web::Error>(bytes),
                (receiver, first && !headers_sent, open),
            ))
        }
    });
    let deadline = tokio::time::sleep(timeout.unwrap_or(DEFAULT_TIMEOUT));
    HttpResponse::Ok()
        .content_type("application/json")
        .streaming(events.take_until(deadline))
}

/// Set in a server's environment, `CAPSTAN_FAILPOINT_DROP_WATCH_EVENT_EVERY=N`
/// makes it drop every Nth ADDED, MODIFIED or DELETED event it would send
/// on any watch: a deliberately broken server for the fault suites to
/// catch. Never set outside those tests.
const DROP_WATCH_EVENTS: &str = "CAPSTAN_FAILPOINT_DROP_WATCH_EVENT_EVERY";

fn dropped_by_failpoint(item: &WatchItem) -> bool {
    static EVERY: OnceLock<u64> = OnceLock::new();
    static SENT: AtomicU64 = AtomicU64::new(0);
    let every = *EVERY.get_or_init(|| {
        let every = std::env::var(DROP_WATCH_EVENTS)
            .ok()
            .and_then(|n| n.parse().ok());
        if let Some(every) = every {
            tracing::warn!(
                every,
                "failpoint {DROP_WATCH_EVENTS} set: watch events are dropped"
            );
        }
        every.unwrap_or(0)
    });
    let change = !matches!(item.kind, EventType::Bookmark | EventType::Error);
    every > 0 && change && (SENT.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every)
}

fn event_object(strategy: &dyn Strategy, form: Form, item: &WatchItem, first: bool) -> Value {
    let object = item.object.value();
    match (form, item.kind) {
        (_, EventType::Error) | (_, EventType::Bookmark) => object,
        (Form::Table, _) => {
            let metadata = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
            render::table(strategy, &[object], metadata, first)
        }
        (form, _) => render::object(strategy, form, object),
    }
}

fn line(value: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(value).expect("JSON values always serialise");
    bytes.push(b'\n');
    Bytes::from(bytes)
}
