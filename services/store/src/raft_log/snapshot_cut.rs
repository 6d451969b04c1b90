//! Raft snapshots for lagging members, cut beside the Ready loop.
//!
//! raft-rs asks the log for a snapshot (`Storage::snapshot`) on the Ready
//! loop, when it finds a follower the log can no longer catch up. Cutting
//! one dumps the whole state machine to a file: seconds for a large store,
//! and done on the loop the leader neither applied nor heartbeated for
//! that long, long enough for an election. So the first ask starts a cut
//! on a thread of its own and is answered `SnapshotTemporarilyUnavailable`,
//! which raft-rs takes as "ask again later" (it does, at the follower's
//! next heartbeat response); a later ask gets the finished cut.
//!
//! A cut is at whatever index the state machine had applied when its dump
//! began, so when it is handed out it must still fit the log: the entries
//! after it still there, its term known, and no membership change applied
//! since it was started (the snapshot carries the voters as of its index,
//! taken from the log when it is handed out). A cut that no longer fits
//! is thrown away and another one started. So is one nobody asks for
//! within [`UNCLAIMED_FOR`] (its follower caught up from the log after all,
//! or left): the file can be as large as the store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use raft::eraftpb::{ConfState, Snapshot};
use raft::StorageError;

use crate::mvcc::MvccStore;

/// Cuts snapshots of one state machine into files in one folder.
pub struct SnapshotCutter {
    mvcc: Arc<MvccStore>,
    dir: PathBuf,
    slot: Arc<Mutex<Slot>>,
}

#[derive(Default)]
enum Slot {
    #[default]
    Idle,
    Cutting,
    Done(Cut),
}

/// A finished cut, not yet handed out.
struct Cut {
    data: Vec<u8>,
    applied_index: u64,
    /// The log's count of membership changes when the cut was started.
    conf_changes: u64,
    finished_at: Instant,
}

/// How long a finished cut waits to be asked for before its file goes.
/// raft asks again at every heartbeat response of a follower that needs
/// it, so a minute unasked means it is needed no more.
pub const UNCLAIMED_FOR: Duration = Duration::from_secs(60);

/// Puts the slot back to idle if the cutting thread panics, so that the
/// next ask starts another cut instead of waiting for this one forever.
struct IdleOnPanic(Arc<Mutex<Slot>>);

impl Drop for IdleOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *self.0.lock() = Slot::Idle;
        }
    }
}

/// What the log tells the cutter when raft asks for a snapshot.
pub struct LogPosition<'a> {
    /// Membership changes the log has recorded so far.
    pub conf_changes: u64,
    /// The term of an index the log still holds entries after.
    pub term_of: &'a dyn Fn(u64) -> Option<u64>,
    pub conf_state: &'a dyn Fn() -> ConfState,
}

fn unavailable() -> raft::Error {
    raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable)
}

impl SnapshotCutter {
    pub fn new(mvcc: Arc<MvccStore>, dir: PathBuf) -> Self {
        SnapshotCutter {
            mvcc,
            dir,
            slot: Arc::new(Mutex::new(Slot::Idle)),
        }
    }

    /// The finished cut if it fits the log at `log` and covers
    /// `request_index`; otherwise starts a cut (unless one is under way) and
    /// says to ask again.
    pub fn snapshot(&self, request_index: u64, log: LogPosition<'_>) -> raft::Result<Snapshot> {
        let mut slot = self.slot.lock();
        match std::mem::take(&mut *slot) {
            Slot::Cutting => *slot = Slot::Cutting,
            Slot::Done(cut) => {
                let term = (cut.conf_changes == log.conf_changes
                    && cut.applied_index >= request_index)
                    .then(|| (log.term_of)(cut.applied_index))
                    .flatten();
                if let Some(term) = term {
                    return Ok(into_snapshot(cut, term, (log.conf_state)()));
                }
                tracing::info!(
                    index = cut.applied_index,
                    "a snapshot cut no longer fits the log; cutting another"
                );
                crate::snapshot::discard(&cut.data);
                *slot = self.start(log.conf_changes);
            }
            Slot::Idle => *slot = self.start(log.conf_changes),
        }
        Err(unavailable())
    }

    /// Throws away a finished cut nobody has asked for within `unclaimed`.
    pub fn drop_unclaimed(&self, unclaimed: Duration) {
        let mut slot = self.slot.lock();
        if let Slot::Done(cut) = &*slot {
            if cut.finished_at.elapsed() >= unclaimed {
                tracing::info!(
                    index = cut.applied_index,
                    "nobody asked for a snapshot cut; removing it"
                );
                crate::snapshot::discard(&cut.data);
                *slot = Slot::Idle;
            }
        }
    }

    /// Starts a cut on a thread of its own.
    fn start(&self, conf_changes: u64) -> Slot {
        let (mvcc, dir, slot) = (self.mvcc.clone(), self.dir.clone(), self.slot.clone());
        let cut = move || {
            let _guard = IdleOnPanic(slot.clone());
            let started = Instant::now();
            let finished = match crate::snapshot::cut(&mvcc, &dir) {
                Ok((data, applied_index)) => {
                    tracing::info!(index = applied_index, took = ?started.elapsed(), "cut a raft snapshot");
                    Slot::Done(Cut {
                        data,
                        applied_index,
                        conf_changes,
                        finished_at: Instant::now(),
                    })
                }
                Err(err) => {
                    // Asked again at the next heartbeat response.
                    tracing::error!(%err, "cannot cut a raft snapshot");
                    Slot::Idle
                }
            };
            *slot.lock() = finished;
        };
        match std::thread::Builder::new()
            .name("snapshot-cut".into())
            .spawn(cut)
        {
            Ok(_) => Slot::Cutting,
            Err(err) => {
                tracing::error!(%err, "cannot start a thread to cut a raft snapshot");
                Slot::Idle
            }
        }
    }
}

fn into_snapshot(cut: Cut, term: u64, conf_state: ConfState) -> Snapshot {
    let mut snapshot = Snapshot::default();
    snapshot.data = cut.data.into();
    let meta = snapshot.mut_metadata();
    meta.index = cut.applied_index;
    meta.term = term;
    meta.set_conf_state(conf_state);
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SledBackend;

    fn ask(cutter: &SnapshotCutter) -> raft::Result<Snapshot> {
        let position = LogPosition {
            conf_changes: 0,
            term_of: &|_| Some(1),
            conf_state: &ConfState::default,
        };
        cutter.snapshot(1, position)
    }

    fn wait_until_done(cutter: &SnapshotCutter) {
        for _ in 0..500 {
            if matches!(*cutter.slot.lock(), Slot::Done(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the cut did not finish");
    }

    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |entries| entries.count())
    }

    #[test]
    fn a_cut_nobody_asks_for_is_removed_and_the_next_ask_cuts_again() {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(SledBackend::open(&dir.path().join("db")).unwrap());
        let mvcc = Arc::new(MvccStore::open(backend).unwrap());
        let mut view = mvcc.write();
        view.put(b"k", b"v".to_vec(), 0).unwrap();
        view.finish(1).unwrap();
        let snap = dir.path().join("snap");
        let cutter = SnapshotCutter::new(mvcc, snap.clone());
        assert!(ask(&cutter).is_err(), "the first ask starts a cut");
        wait_until_done(&cutter);
        assert_eq!(files(&snap), 1);
        cutter.drop_unclaimed(UNCLAIMED_FOR);
        assert_eq!(files(&snap), 1, "a fresh cut stays");
        cutter.drop_unclaimed(Duration::ZERO);
        assert_eq!(files(&snap), 0, "an unclaimed cut's file is removed");
        assert!(ask(&cutter).is_err(), "the next ask starts another cut");
        wait_until_done(&cutter);
        let snapshot = ask(&cutter).unwrap();
        assert_eq!(snapshot.get_metadata().index, 1);
    }

    #[test]
    fn a_cutting_thread_that_panics_leaves_the_slot_idle() {
        let slot = Arc::new(Mutex::new(Slot::Cutting));
        let for_thread = slot.clone();
        let joined = std::thread::spawn(move || {
            let _guard = IdleOnPanic(for_thread);
            panic!("the dump failed halfway");
        })
        .join();
        assert!(joined.is_err());
        assert!(matches!(*slot.lock(), Slot::Idle));
    }
}
