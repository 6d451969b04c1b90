//! Physical compaction: forgetting old revisions in the key index and
//! deleting their records, in small steps on a thread of its own.
//!
//! A compaction is applied like any other entry, but only its logical part
//! runs there: the compaction revision is recorded, and from then on no
//! read below it is served. Everything else happens here, because done in
//! the apply it stalled every write: one backend batch for all the records
//! (a long history holds millions) took as long as the engine needed to
//! write it, and compacting the index of a million keys held the store's
//! write lock for 70-90 ms. Here the index is compacted a slice of keys at a
//! time under the lock, and the records each slice dropped are deleted in
//! batches, at the pace the engine takes them.
//!
//! Nothing records how far a compaction got. It need not: a member that
//! restarts rebuilds its index from the records it finds and compacts it
//! again at the stored compaction revision (see `MvccStore::open`), which
//! finds exactly the records still to delete.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use super::revision::Revision;
use super::state::State;
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space, WriteBatch};

/// Keys whose histories are compacted per hold of the write lock.
const SLICE_KEYS: usize = 10_000;
/// Records deleted per backend write.
const BATCH: usize = 1000;
/// Pause between batches, so the apply loop's writes never queue behind a
/// long run of deletions.
const PAUSE: Duration = Duration::from_millis(1);
/// Writes the backend may hold back (see `Backend::backlog`) before the
/// next batch goes. Deleting scattered records is slow for the engine; had
/// the compactor not waited, deletions piled up in the write-behind map
/// until an apply had to move them itself, a stall of half a second
/// (measured at 100,000 records).
const MAX_BACKLOG: usize = 4 * BATCH;

/// What the thread works with.
struct Shared {
    state: Arc<RwLock<State>>,
    backend: Arc<dyn Backend>,
    /// Taken for each deletion, so none happens while a dump reads.
    removals: Arc<RwLock<()>>,
    finished: watch::Sender<i64>,
    stop: AtomicBool,
}

/// The compacting thread, and how far it has got.
pub struct Compactor {
    jobs: Mutex<Option<Sender<i64>>>,
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Compactor {
    /// Starts the thread for the store whose state and backend are given.
    pub fn start(
        state: Arc<RwLock<State>>,
        backend: Arc<dyn Backend>,
        removals: Arc<RwLock<()>>,
    ) -> Result<Self> {
        let (jobs, receiver) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            state,
            backend,
            removals,
            finished: watch::channel(0).0,
            stop: AtomicBool::new(false),
        });
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("compactor".into())
            .spawn(move || run(&for_thread, receiver))
            .map_err(|err| StoreError::Storage(format!("spawn the compactor: {err}")))?;
        Ok(Compactor {
            jobs: Mutex::new(Some(jobs)),
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Compacts the index at `at` and deletes what that drops, after every
    /// compaction scheduled before.
    pub fn schedule(&self, at: i64) {
        if let Some(jobs) = &*self.jobs.lock() {
            // The thread only ends once this sender is gone.
            let _ = jobs.send(at);
        }
    }

    /// Waits until the compaction at `at` is done: its records deleted
    /// from the backend (what a client's `physical` compaction asks for).
    pub async fn wait_finished(&self, at: i64) {
        let mut finished = self.shared.finished.subscribe();
        // Fails only when the compactor is dropped, with the store.
        let _ = finished.wait_for(|done| *done >= at).await;
    }
}

impl Drop for Compactor {
    /// Stops at the next step: what is left is found again on restart.
    /// Joining matters, as the thread holds the backend open.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.jobs.lock().take();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, jobs: Receiver<i64>) {
    for at in jobs {
        let started = Instant::now();
        let Some(records) = compact(shared, at) else {
            return; // stopping
        };
        if records > 0 {
            let took = started.elapsed();
            tracing::info!(at, records, ?took, "finished a compaction");
        }
        shared.finished.send_if_modified(|done| {
            let newer = at > *done;
            *done = (*done).max(at);
            newer
        });
    }
}

/// Compacts the index at `at` a slice at a time, deleting each slice's
/// records; returns how many, or None if told to stop.
fn compact(shared: &Shared, at: i64) -> Option<usize> {
    let mut from = Vec::new();
    let mut records = 0;
    loop {
        let (removed, next) = shared
            .state
            .write()
            .index
            .compact_slice(at, &from, SLICE_KEYS);
        records += removed.len();
        for chunk in removed.chunks(BATCH) {
            if shared.stop.load(Ordering::Acquire) {
                return None;
            }
            delete(shared, chunk);
        }
        match next {
            Some(next) => from = next,
            None => return Some(records),
        }
    }
}

fn delete(shared: &Shared, revisions: &[Revision]) {
    let mut batch = WriteBatch::default();
    for rev in revisions {
        batch.delete(rev.to_key().to_vec());
    }
    let removing = shared.removals.write();
    if let Err(err) = shared.backend.write(Space::Mvcc, batch) {
        // The records stay, unreachable; the next start deletes them.
        tracing::error!(%err, "cannot delete compacted records");
    }
    drop(removing);
    std::thread::sleep(PAUSE);
    while shared.backend.backlog() > MAX_BACKLOG && !shared.stop.load(Ordering::Acquire) {
        std::thread::sleep(PAUSE);
    }
}
