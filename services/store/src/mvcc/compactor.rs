//! Physical compaction: deleting the revision records a compaction made
//! unreachable, in small batches on a thread of its own.
//!
//! A compaction is applied like any other entry, but only its logical part
//! runs there: the key index forgets the old revisions and the compaction
//! revision is recorded, so no read can reach them any more. Deleting the
//! records themselves is left to this thread, because one batch for all of
//! them (a long history holds millions) stalled the apply loop for as long
//! as the engine took to write it, and held it all in memory at once.
//!
//! Nothing records how far the deletions got. They need not be durable: a
//! member that restarts rebuilds its index from the records it finds,
//! compacts it again at the stored compaction revision, and the revisions
//! that compaction returns are exactly the ones still to delete.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::Revision;
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space, WriteBatch};

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

/// The records a compaction at `at` left behind.
struct Job {
    at: i64,
    revisions: Vec<Revision>,
}

/// The deleting thread, and how far it has got.
pub struct Compactor {
    jobs: Mutex<Option<Sender<Job>>>,
    finished: watch::Sender<i64>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Compactor {
    /// Starts the thread. `finished` is the compaction revision whose
    /// records are all gone already.
    pub fn start(backend: Arc<dyn Backend>, finished: i64) -> Result<Self> {
        let (jobs, receiver) = std::sync::mpsc::channel();
        let (finished, _) = watch::channel(finished);
        let stop = Arc::new(AtomicBool::new(false));
        let (report, stopping) = (finished.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("compactor".into())
            .spawn(move || run(&*backend, receiver, &report, &stopping))
            .map_err(|err| StoreError::Storage(format!("spawn the compactor: {err}")))?;
        Ok(Compactor {
            jobs: Mutex::new(Some(jobs)),
            finished,
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Deletes the records of `revisions`, which the compaction at `at`
    /// made unreachable, after every job scheduled before.
    pub fn schedule(&self, at: i64, revisions: Vec<Revision>) {
        if let Some(jobs) = &*self.jobs.lock() {
            // The thread only ends once this sender is gone.
            let _ = jobs.send(Job { at, revisions });
        }
    }

    /// Waits until the records of the compaction at `at` are all deleted
    /// (what a client's `physical` compaction asks for).
    pub async fn wait_finished(&self, at: i64) {
        let mut finished = self.finished.subscribe();
        // Fails only when the compactor is dropped, with the store.
        let _ = finished.wait_for(|done| *done >= at).await;
    }

    /// The newest compaction revision whose records are all deleted.
    #[cfg(test)]
    pub fn finished(&self) -> i64 {
        *self.finished.borrow()
    }
}

impl Drop for Compactor {
    /// Stops at the next batch: what is left is found again on restart.
    /// Joining matters, as the thread holds the backend open.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.jobs.lock().take();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

fn run(
    backend: &dyn Backend,
    jobs: Receiver<Job>,
    finished: &watch::Sender<i64>,
    stop: &AtomicBool,
) {
    for job in jobs {
        let started = std::time::Instant::now();
        for chunk in job.revisions.chunks(BATCH) {
            if stop.load(Ordering::Acquire) {
                return;
            }
            let mut batch = WriteBatch::default();
            for rev in chunk {
                batch.delete(rev.to_key().to_vec());
            }
            if let Err(err) = backend.write(Space::Mvcc, batch) {
                // The records stay; they are unreachable, and the next
                // start finds and deletes them.
                tracing::error!(%err, "cannot delete compacted records");
                break;
            }
            std::thread::sleep(PAUSE);
            while backend.backlog() > MAX_BACKLOG && !stop.load(Ordering::Acquire) {
                std::thread::sleep(PAUSE);
            }
        }
        if !job.revisions.is_empty() {
            let took = started.elapsed();
            tracing::info!(
                at = job.at,
                records = job.revisions.len(),
                ?took,
                "finished a compaction"
            );
        }
        finished.send_if_modified(|done| {
            let newer = job.at > *done;
            *done = (*done).max(job.at);
            newer
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SledBackend;

    #[test]
    fn scheduled_records_are_deleted_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let mut batch = WriteBatch::default();
        for main in 1..=2500 {
            batch.put(Revision::new(main, 0).to_key().to_vec(), b"v".to_vec());
        }
        backend.write(Space::Mvcc, batch).unwrap();
        let compactor = Compactor::start(backend.clone(), 0).unwrap();
        let gone: Vec<_> = (1..=2400).map(|main| Revision::new(main, 0)).collect();
        compactor.schedule(2401, gone);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(compactor.wait_finished(2401));
        assert_eq!(compactor.finished(), 2401);
        let left = backend.scan(Space::Mvcc, &[], None).unwrap();
        let mains: Vec<_> = left
            .iter()
            .map(|(key, _)| Revision::from_key(key).unwrap().main)
            .collect();
        assert_eq!(mains, (2401..=2500).collect::<Vec<_>>());
    }
}
