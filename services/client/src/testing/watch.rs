//! Watches: each open watch has a channel its collection's changes go
//! into (under the state lock, so none is missed) and a task that turns
//! them into the watch's events: selectors applied per watcher (an
//! object leaving the selection is DELETED for it, one entering is
//! ADDED), an optional delivery delay, bookmarks, and `timeoutSeconds`.
//! A watcher whose buffer fills is cut off, as kube cuts slow watchers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::objects::{Change, ChangeType, Collection};
use super::selectors::Selectors;
use crate::connect::ResponseBody;

/// Changes a watcher may lag behind before it is cut off.
const WATCH_BUFFER: usize = 1000;

struct Watcher {
    collection: Collection,
    sender: mpsc::Sender<(Instant, Arc<Change>)>,
    /// Cancelled when the watch is cut: its stream ends at once, events
    /// still in a delay are lost, as on a dropped connection.
    cut: CancellationToken,
}

/// The open watches.
#[derive(Default)]
pub(super) struct Watchers {
    open: Vec<Watcher>,
}

impl Watchers {
    /// Hands `change` to every watcher of its collection.
    pub(super) fn notify(&mut self, change: &Arc<Change>) {
        let now = Instant::now();
        self.open.retain(|w| {
            let kept = w.collection != change.collection
                || w.sender.try_send((now, change.clone())).is_ok();
            if !kept {
                w.cut.cancel();
            }
            kept
        });
    }

    /// Ends every watch, as a dropped connection would.
    pub(super) fn close_all(&mut self) {
        for watcher in self.open.drain(..) {
            watcher.cut.cancel();
        }
    }

    /// How many watches are open.
    pub(super) fn count(&self) -> usize {
        self.open.iter().filter(|w| !w.sender.is_closed()).count()
    }
}

/// How one watch behaves.
pub(super) struct WatchSpec {
    pub namespace: Option<String>,
    pub selectors: Selectors,
    pub delay: Duration,
    pub bookmarks: Option<Duration>,
    pub timeout: Option<Duration>,
    pub kind: String,
    pub api_version: String,
    pub start_version: u64,
}

impl WatchSpec {
    fn selects(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
            && self.selectors.matches(object)
    }

    /// The event this watcher sees for `change`, if any.
    fn render(&self, change: &Change) -> Option<Value> {
        let now = self.selects(&change.object);
        let before = change.old.as_ref().is_some_and(|o| self.selects(o));
        let kind = match (change.change, before, now) {
            (ChangeType::Added, _, true) => "ADDED",
            (ChangeType::Modified, true, true) => "MODIFIED",
            (ChangeType::Modified, false, true) => "ADDED",
            (ChangeType::Modified, true, false) => "DELETED",
            (ChangeType::Deleted, true, _) | (ChangeType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some(json!({"type": kind, "object": change.object}))
    }
}

/// Registers a watcher and starts its task; `initial` are the events it
/// sends first (a listing, or the history it resumes from). Returns the
/// response body.
pub(super) fn open(
    watchers: &mut Watchers,
    collection: Collection,
    spec: WatchSpec,
    initial: Vec<Arc<Change>>,
    synthetic: Vec<Value>,
) -> ResponseBody {
    let (sender, receiver) = mpsc::channel(WATCH_BUFFER);
    let cut = CancellationToken::new();
    watchers.open.push(Watcher {
        collection,
        sender,
        cut: cut.clone(),
    });
    let (out, body) = stream_body();
    tokio::spawn(async move {
        tokio::select! {
            _ = forward(spec, receiver, initial, synthetic, out) => {}
            _ = cut.cancelled() => {}
        }
    });
    body
}

/// A body that is one ERROR event (a watch that cannot start), as kube
/// answers a watch from a compacted version: 200, then the Status.
pub(super) fn error_body(status: Value) -> ResponseBody {
    line_body(&json!({"type": "ERROR", "object": status}))
}

type Out = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

fn stream_body() -> (Out, ResponseBody) {
    let (out, receiver) = mpsc::channel(16);
    let stream =
        futures::stream::unfold(
            receiver,
            |mut r| async move { r.recv().await.map(|f| (f, r)) },
        );
    (
        out,
        StreamBody::new(stream.boxed())
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

fn line_body(event: &Value) -> ResponseBody {
    let mut line = event.to_string().into_bytes();
    line.push(b'\n');
    http_body_util::Full::new(Bytes::from(line))
        .map_err(|never| match never {})
        .boxed_unsync()
}

async fn send(out: &Out, event: &Value) -> bool {
    let mut line = event.to_string().into_bytes();
    line.push(b'\n');
    out.send(Ok(Frame::data(Bytes::from(line)))).await.is_ok()
}

async fn forward(
    spec: WatchSpec,
    mut changes: mpsc::Receiver<(Instant, Arc<Change>)>,
    initial: Vec<Arc<Change>>,
    synthetic: Vec<Value>,
    out: Out,
) {
    let started = Instant::now();
    let ends = spec.timeout.map(|t| started + t);
    let mut sent_version = spec.start_version;
    let far = Duration::from_secs(365 * 24 * 3600);
    let mut next_bookmark = started + spec.bookmarks.unwrap_or(far);
    for event in synthetic {
        if !send(&out, &event).await {
            return;
        }
    }
    let mut pending: std::collections::VecDeque<(Instant, Arc<Change>)> =
        initial.into_iter().map(|c| (started, c)).collect();
    loop {
        if let Some((at, change)) = pending.pop_front() {
            tokio::time::sleep_until(at + spec.delay).await;
            if let Some(event) = spec.render(&change) {
                if !send(&out, &event).await {
                    return;
                }
            }
            sent_version = change.resource_version;
            continue;
        }
        let deadline = ends.unwrap_or(started + far);
        tokio::select! {
            next = changes.recv() => match next {
                Some(item) => pending.push_back(item),
                None => return,
            },
            _ = tokio::time::sleep_until(next_bookmark) => {
                let bookmark = json!({"type": "BOOKMARK", "object": {
                    "kind": spec.kind, "apiVersion": spec.api_version,
                    "metadata": {"resourceVersion": sent_version.to_string()},
                }});
                if !send(&out, &bookmark).await {
                    return;
                }
                next_bookmark = Instant::now() + spec.bookmarks.unwrap_or(far);
            }
            _ = tokio::time::sleep_until(deadline) => return,
            _ = out.closed() => return,
        }
    }
}
