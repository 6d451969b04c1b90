//! The watch hub: the registry of watchers, live delivery from the apply
//! loop, and the catch-up thread that replays history to unsynced watchers.
//!
//! Lock order: the hub's lock may be taken while holding the MVCC write lock
//! (the apply loop calls `notify` after its write), never the other way round;
//! the catch-up thread reads MVCC history without holding the hub's lock.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::{ResponseHeader, WatchResponse};
use capstan_proto::mvccpb::Event;
use parking_lot::{Condvar, Mutex};
use tokio::sync::mpsc::{self, error::TrySendError};

use super::batch::ResponseBatch;
use super::filter::WatchFilter;
use crate::error::StoreError;
use crate::mvcc::MvccStore;

/// A watcher is named by its stream and its id on that stream.
pub type WatcherKey = (u64, i64);

/// How many store revisions one catch-up step reads from history.
const CATCH_UP_BATCH: i64 = 1000;

struct Watcher {
    filter: WatchFilter,
    /// The first revision this watcher has not been sent yet.
    next_rev: i64,
    progress_notify: bool,
    tx: mpsc::Sender<WatchResponse>,
}

#[derive(Default)]
struct Inner {
    /// The newest revision handed to `notify`.
    current_rev: i64,
    synced: HashMap<WatcherKey, Watcher>,
    unsynced: HashMap<WatcherKey, Watcher>,
}

pub struct WatchHub {
    inner: Mutex<Inner>,
    mvcc: Arc<MvccStore>,
    wake: Condvar,
    wake_flag: Mutex<bool>,
    /// The byte budget of one catch-up response.
    max_response_bytes: usize,
}

fn response(watch_id: i64, revision: i64, events: Vec<Event>) -> WatchResponse {
    WatchResponse {
        header: Some(ResponseHeader {
            revision,
            ..Default::default()
        }),
        watch_id,
        events,
        ..Default::default()
    }
}

fn compacted_response(watch_id: i64, compact_rev: i64) -> WatchResponse {
    WatchResponse {
        canceled: true,
        compact_revision: compact_rev,
        cancel_reason: StoreError::Compacted.to_string(),
        ..response(watch_id, 0, Vec::new())
    }
}

enum Delivery {
    Sent,
    Full,
    Closed,
}

fn deliver(tx: &mpsc::Sender<WatchResponse>, resp: WatchResponse) -> Delivery {
    match tx.try_send(resp) {
        Ok(()) => Delivery::Sent,
        Err(TrySendError::Full(_)) => Delivery::Full,
        Err(TrySendError::Closed(_)) => Delivery::Closed,
    }
}

impl WatchHub {
    /// A hub over `mvcc` whose catch-up responses stay under
    /// `max_response_bytes` (unless one revision alone is larger).
    pub fn new(mvcc: Arc<MvccStore>, max_response_bytes: usize) -> Arc<Self> {
        let inner = Inner {
            current_rev: mvcc.current_revision(),
            ..Default::default()
        };
        Arc::new(WatchHub {
            inner: Mutex::new(inner),
            mvcc,
            wake: Condvar::new(),
            wake_flag: Mutex::new(false),
            max_response_bytes,
        })
    }

    /// Starts the catch-up thread; it ends when the hub is dropped.
    pub fn start(self: &Arc<Self>, progress_interval: Duration) {
        let hub = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("watch-catch-up".into())
            .spawn(move || catch_up_loop(hub, progress_interval))
            .expect("spawn watch catch-up thread");
    }

    fn wake_catch_up(&self) {
        *self.wake_flag.lock() = true;
        self.wake.notify_one();
    }

    /// Adds a watcher starting at `start_rev` (≤ 0: the next revision).
    pub fn register(
        &self,
        key: WatcherKey,
        filter: WatchFilter,
        start_rev: i64,
        progress_notify: bool,
        tx: mpsc::Sender<WatchResponse>,
    ) {
        let mut inner = self.inner.lock();
        let next_rev = if start_rev <= 0 {
            inner.current_rev + 1
        } else {
            start_rev
        };
        let watcher = Watcher {
            filter,
            next_rev,
            progress_notify,
            tx,
        };
        if next_rev > inner.current_rev {
            inner.synced.insert(key, watcher);
        } else {
            inner.unsynced.insert(key, watcher);
            drop(inner);
            self.wake_catch_up();
        }
    }

    pub fn cancel(&self, key: WatcherKey) -> bool {
        let mut inner = self.inner.lock();
        inner.synced.remove(&key).is_some() || inner.unsynced.remove(&key).is_some()
    }

    pub fn cancel_stream(&self, stream: u64) {
        let mut inner = self.inner.lock();
        inner.synced.retain(|key, _| key.0 != stream);
        inner.unsynced.retain(|key, _| key.0 != stream);
    }

    pub fn watcher_count(&self) -> usize {
        let inner = self.inner.lock();
        inner.synced.len() + inner.unsynced.len()
    }

    /// The revision up to which every watcher of `stream` has been sent all
    /// its events, or None while one of them is still catching up.
    pub fn progress(&self, stream: u64) -> Option<i64> {
        let inner = self.inner.lock();
        let behind = inner.unsynced.keys().any(|key| key.0 == stream);
        (!behind).then_some(inner.current_rev)
    }

    /// After the state machine was replaced by a snapshot: the present is
    /// now `current_rev`, and every watcher replays what it missed from the
    /// restored history (or is cancelled if that was compacted away).
    pub fn resync(&self, current_rev: i64) {
        let mut inner = self.inner.lock();
        inner.current_rev = current_rev;
        let synced: Vec<_> = inner.synced.drain().collect();
        inner.unsynced.extend(synced);
        drop(inner);
        self.wake_catch_up();
    }

    /// Hands the events of revision `rev` to every synced watcher. Called by
    /// the apply loop, in revision order. Never blocks on a watcher.
    pub fn notify(&self, rev: i64, events: Vec<Event>) {
        let mut inner = self.inner.lock();
        inner.current_rev = rev;
        let mut fallen_behind = Vec::new();
        let mut closed = Vec::new();
        for (key, watcher) in inner.synced.iter_mut() {
            if rev < watcher.next_rev {
                continue; // a watcher that starts in the future
            }
            let selected = watcher.filter.select(&events);
            if selected.is_empty() {
                watcher.next_rev = rev + 1;
                continue;
            }
            match deliver(&watcher.tx, response(key.1, rev, selected)) {
                Delivery::Sent => watcher.next_rev = rev + 1,
                Delivery::Full => fallen_behind.push(*key),
                Delivery::Closed => closed.push(*key),
            }
        }
        for key in closed {
            inner.synced.remove(&key);
        }
        let any_behind = !fallen_behind.is_empty();
        for key in fallen_behind {
            if let Some(watcher) = inner.synced.remove(&key) {
                inner.unsynced.insert(key, watcher);
            }
        }
        drop(inner);
        if any_behind {
            self.wake_catch_up();
        }
    }

    /// One catch-up pass over the unsynced watchers. Returns true if some
    /// watcher is still behind and another pass should follow at once.
    fn catch_up(&self) -> bool {
        let (work, current) = {
            let inner = self.inner.lock();
            let work: Vec<_> = inner
                .unsynced
                .iter()
                .map(|(key, w)| (*key, w.next_rev, w.filter.clone(), w.tx.clone()))
                .collect();
            (work, inner.current_rev)
        };
        let mut more = false;
        for (key, next_rev, filter, tx) in work {
            match self.replay(key, next_rev, current, &filter, &tx) {
                Replay::Reached(next) => more |= self.finish_replay(key, next),
                Replay::Stalled(next) => {
                    self.finish_replay(key, next);
                }
                Replay::Gone => {
                    self.inner.lock().unsynced.remove(&key);
                }
            }
        }
        more
    }

    /// Sends a watcher the events from `next` up to `current`, many
    /// revisions per response (see `batch.rs`).
    fn replay(
        &self,
        key: WatcherKey,
        mut next: i64,
        current: i64,
        filter: &WatchFilter,
        tx: &mpsc::Sender<WatchResponse>,
    ) -> Replay {
        let mut batch = ResponseBatch::new(self.max_response_bytes);
        while next <= current {
            let revisions = match self.mvcc.events_between(next, current, CATCH_UP_BATCH) {
                Ok(revisions) => revisions,
                Err(StoreError::Compacted) => {
                    let compact = self.mvcc.compact_revision();
                    return match deliver(tx, compacted_response(key.1, compact)) {
                        Delivery::Full => Replay::Stalled(next),
                        _ => Replay::Gone,
                    };
                }
                Err(err) => {
                    tracing::error!(%err, "watch catch-up cannot read history");
                    return Replay::Stalled(next);
                }
            };
            for (rev, events) in revisions {
                let selected = filter.select(&events);
                if selected.is_empty() {
                    continue;
                }
                if !batch.fits(&selected) {
                    if let Some(stop) = send_batch(key.1, current, &mut batch, tx) {
                        return stop;
                    }
                }
                batch.push(rev, selected);
            }
            next = current.min(next + CATCH_UP_BATCH - 1) + 1;
        }
        match send_batch(key.1, current, &mut batch, tx) {
            Some(stop) => stop,
            None => Replay::Reached(next),
        }
    }

    /// Records how far a watcher got; moves it to synced if it reached the
    /// present. Returns true if it is still behind.
    fn finish_replay(&self, key: WatcherKey, next: i64) -> bool {
        let mut inner = self.inner.lock();
        let current = inner.current_rev;
        let Some(watcher) = inner.unsynced.get_mut(&key) else {
            return false;
        };
        watcher.next_rev = next;
        if next > current {
            let watcher = inner.unsynced.remove(&key).expect("present above");
            inner.synced.insert(key, watcher);
            false
        } else {
            true
        }
    }

    /// Sends a progress notification to each synced watcher that asked.
    fn send_progress(&self) {
        let inner = self.inner.lock();
        for (key, watcher) in inner.synced.iter() {
            if watcher.progress_notify {
                let _ = deliver(&watcher.tx, response(key.1, inner.current_rev, Vec::new()));
            }
        }
    }
}

/// Sends what `batch` holds as one response whose header carries the
/// present revision, as etcd's catch-up responses do. None if it went
/// (or was empty), else how the replay stops.
fn send_batch(
    watch_id: i64,
    current: i64,
    batch: &mut ResponseBatch,
    tx: &mpsc::Sender<WatchResponse>,
) -> Option<Replay> {
    if batch.is_empty() {
        return None;
    }
    let first = batch.first_revision();
    match deliver(tx, response(watch_id, current, batch.take())) {
        Delivery::Sent => None,
        Delivery::Full => Some(Replay::Stalled(first)),
        Delivery::Closed => Some(Replay::Gone),
    }
}

enum Replay {
    /// Sent everything up to the captured present; the next revision to send.
    Reached(i64),
    /// The stream is full; resume from this revision later.
    Stalled(i64),
    /// The watcher is finished (cancelled or its stream closed).
    Gone,
}

fn catch_up_loop(hub: Weak<WatchHub>, progress_interval: Duration) {
    let mut last_progress = Instant::now();
    loop {
        let Some(hub) = hub.upgrade() else { return };
        let more = hub.catch_up();
        if last_progress.elapsed() >= progress_interval {
            hub.send_progress();
            last_progress = Instant::now();
        }
        if !more {
            let mut flag = hub.wake_flag.lock();
            if !*flag {
                hub.wake.wait_for(&mut flag, Duration::from_millis(100));
            }
            *flag = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::KeyRange;
    use crate::storage::SledBackend;

    fn store(dir: &std::path::Path) -> Arc<MvccStore> {
        Arc::new(MvccStore::open(Arc::new(SledBackend::open(dir).unwrap())).unwrap())
    }

    fn all_keys() -> WatchFilter {
        WatchFilter {
            range: KeyRange::new(b"\0", b"\0"),
            no_put: false,
            no_delete: false,
            prev_kv: true,
        }
    }

    fn write(mvcc: &MvccStore, hub: &WatchHub, key: &str, index: u64) {
        let mut view = mvcc.write();
        view.put(key.as_bytes(), b"v".to_vec(), 0).unwrap();
        let done = view.finish(index).unwrap();
        hub.notify(done.revision, done.events);
    }

    #[test]
    fn live_watcher_gets_each_revision_once() {
        let dir = tempfile::tempdir().unwrap();
        let mvcc = store(dir.path());
        let hub = WatchHub::new(mvcc.clone(), 1 << 20);
        let (tx, mut rx) = mpsc::channel(16);
        hub.register((1, 0), all_keys(), 0, false, tx);
        write(&mvcc, &hub, "a", 1);
        write(&mvcc, &hub, "b", 2);
        let first = rx.try_recv().unwrap();
        let second = rx.try_recv().unwrap();
        assert_eq!(first.header.unwrap().revision, 2);
        assert_eq!(second.events[0].kv.as_ref().unwrap().key, b"b");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn slow_watcher_catches_up_from_history_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mvcc = store(dir.path());
        let hub = WatchHub::new(mvcc.clone(), 1 << 20);
        let (tx, mut rx) = mpsc::channel(2);
        hub.register((1, 0), all_keys(), 0, false, tx);
        for i in 0..10 {
            write(&mvcc, &hub, &format!("k{i}"), i + 1);
        }
        let mut revisions = Vec::new();
        for _ in 0..50 {
            while let Ok(resp) = rx.try_recv() {
                revisions.extend(
                    resp.events
                        .iter()
                        .map(|e| e.kv.as_ref().unwrap().mod_revision),
                );
            }
            hub.catch_up();
        }
        assert_eq!(revisions, (2..=11).collect::<Vec<_>>());
        assert_eq!(hub.progress(1), Some(11));
    }

    #[test]
    fn catch_up_sends_many_revisions_per_response() {
        let dir = tempfile::tempdir().unwrap();
        let mvcc = store(dir.path());
        let hub = WatchHub::new(mvcc.clone(), 1 << 20);
        for i in 0..2500 {
            write(&mvcc, &hub, &format!("k{i}"), i + 1);
        }
        let (tx, mut rx) = mpsc::channel(16);
        hub.register((1, 0), all_keys(), 1, false, tx);
        assert!(!hub.catch_up(), "one pass reaches the present");
        let mut sizes = Vec::new();
        while let Ok(resp) = rx.try_recv() {
            assert_eq!(resp.header.unwrap().revision, 2501, "the present revision");
            sizes.push(resp.events.len());
        }
        assert_eq!(sizes, [1000, 1000, 500]);
        assert_eq!(hub.progress(1), Some(2501));
    }

    #[test]
    fn watcher_on_compacted_revision_is_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let mvcc = store(dir.path());
        let hub = WatchHub::new(mvcc.clone(), 1 << 20);
        write(&mvcc, &hub, "a", 1);
        write(&mvcc, &hub, "a", 2);
        let mut view = mvcc.write();
        view.compact(3).unwrap();
        view.finish(3).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        hub.register((1, 5), all_keys(), 2, false, tx);
        hub.catch_up();
        let resp = rx.try_recv().unwrap();
        assert!(resp.canceled);
        assert_eq!(resp.compact_revision, 3);
        assert_eq!(hub.watcher_count(), 0);
    }
}
