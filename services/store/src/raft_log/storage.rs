//! The raft log, hard state and conf state of this member.
//!
//! Implements raft-rs's [`Storage`]. The log lives in memory (as etcd's
//! `MemoryStorage` does) and in an append-only file ([`WalFile`]): writes
//! through [`RaftLog::append`] and [`RaftLog::set_hard_state`] are only staged
//! there; the Ready loop makes them durable with one [`RaftLog::sync`] (one
//! write, one fdatasync) per Ready before anything is acknowledged.
//!
//! The state machine is not synced per Ready: after a crash it is replayed
//! from this log, from its own durable applied index on. So entries are
//! dropped from the front only after the state machine has been flushed past
//! them (see the node's `truncate_log`).

use std::path::Path;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use super::cached::{decode, encode, to_wal, Cached};
use super::snapshot_cut::{LogPosition, SnapshotCutter, UNCLAIMED_FOR};
use super::wal::{Position, WalFile, WalRecord};
use crate::error::{Result, StoreError};
use crate::failpoints::Failpoints;
use crate::mvcc::MvccStore;
use crate::storage::{Backend, Space, WriteBatch};

/// Where the log of a new cluster starts (see [`RaftLog::bootstrap`]).
pub const BOOTSTRAP_INDEX: u64 = 1;
/// The last installed snapshot's metadata, in the backend's raft space.
const SNAPSHOT_META_KEY: &[u8] = b"s/snapshot_meta";

/// The raft log of this member. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct RaftLog {
    cached: Arc<RwLock<Cached>>,
    wal: Arc<Mutex<WalFile>>,
    /// Held while the file is written: by a sync (outside `wal`'s lock, so
    /// the Ready loop stages the next records meanwhile) and by a rewrite,
    /// which must not replace the file under a sync. Taken before `cached`
    /// and `wal`.
    io: Arc<Mutex<()>>,
    /// Cuts snapshots of the state machine for lagging peers.
    cutter: Option<Arc<SnapshotCutter>>,
    failpoints: Option<Arc<Failpoints>>,
}

impl RaftLog {
    /// Opens the log file at `path`, replaying it into memory.
    pub fn open(path: &Path) -> Result<Self> {
        let (wal, records) = WalFile::open(path)?;
        let mut cached = Cached::default();
        for record in records {
            cached.replay(record)?;
        }
        Ok(RaftLog {
            cached: Arc::new(RwLock::new(cached)),
            wal: Arc::new(Mutex::new(wal)),
            io: Arc::new(Mutex::new(())),
            cutter: None,
            failpoints: None,
        })
    }

    /// Starts the log of a brand-new cluster as if from a snapshot at index
    /// 1, term 1, holding the initial voters. Every initial member does the
    /// same, so they agree; a member added later has nothing at index 1 and
    /// is therefore brought up to date with a snapshot, which carries the
    /// membership, instead of replaying a log that never recorded it.
    pub fn bootstrap(&self, voters: Vec<u64>) -> Result<()> {
        let mut conf_state = ConfState::default();
        conf_state.voters = voters;
        let mut hard_state = HardState::default();
        hard_state.term = BOOTSTRAP_INDEX;
        hard_state.commit = BOOTSTRAP_INDEX;
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = BOOTSTRAP_INDEX;
        meta.term = BOOTSTRAP_INDEX;
        meta.set_conf_state(conf_state);
        self.set_hard_state(&hard_state)?;
        self.apply_snapshot(&snapshot)
    }

    /// Lets the `raft-log-sync-delay` failpoint hold every sync.
    pub fn with_failpoints(mut self, failpoints: Arc<Failpoints>) -> Self {
        self.failpoints = Some(failpoints);
        self
    }

    /// Lets the log cut snapshots of `mvcc` into files in `snap_dir`.
    pub fn with_state_machine(mut self, mvcc: Arc<MvccStore>, snap_dir: &Path) -> Self {
        self.cutter = Some(Arc::new(SnapshotCutter::new(mvcc, snap_dir.to_path_buf())));
        self
    }

    /// Replaces the whole log with a snapshot's position: every entry goes,
    /// the log now starts right after the snapshot. Durable on return.
    pub fn apply_snapshot(&self, snapshot: &Snapshot) -> Result<()> {
        let meta = snapshot.get_metadata();
        let _io = self.io.lock();
        let mut cached = self.cached.write();
        let mut wal = self.wal.lock();
        cached.clear(Position {
            index: meta.index,
            term: meta.term,
        });
        cached.conf_state = meta.get_conf_state().clone();
        cached.conf_changes += 1;
        cached.hard_state.commit = cached.hard_state.commit.max(meta.index);
        cached.hard_state.term = cached.hard_state.term.max(meta.term);
        wal.rewrite(&cached.full_record())
    }

    pub fn is_initialized(&self) -> bool {
        self.cached.read().conf_state != ConfState::default()
    }

    pub fn hard_state(&self) -> HardState {
        self.cached.read().hard_state.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.cached.read().conf_state.clone()
    }

    pub fn last_index(&self) -> u64 {
        self.cached.read().last_index()
    }

    /// Stages entries, replacing any conflicting suffix of the log.
    pub fn append(&self, entries: &[Entry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut cached = self.cached.write();
        cached.splice(entries.iter().cloned())?;
        self.wal.lock().stage(&WalRecord {
            entries: entries.iter().map(to_wal).collect(),
            ..Default::default()
        });
        Ok(())
    }

    /// Stages the hard state.
    pub fn set_hard_state(&self, hard_state: &HardState) -> Result<()> {
        let mut cached = self.cached.write();
        cached.hard_state = hard_state.clone();
        self.wal.lock().stage(&WalRecord {
            hard_state: Some(encode(hard_state)),
            ..Default::default()
        });
        Ok(())
    }

    pub fn set_commit(&self, commit: u64) -> Result<()> {
        let mut hard_state = self.hard_state();
        if hard_state.commit >= commit {
            return Ok(());
        }
        hard_state.commit = commit;
        self.set_hard_state(&hard_state)
    }

    /// Records the conf state durably at once: the state machine may
    /// persist the membership change on its own before the next sync, and
    /// it must never be ahead of the log's idea of the voters.
    pub fn set_conf_state(&self, conf_state: &ConfState) -> Result<()> {
        let mut cached = self.cached.write();
        cached.conf_state = conf_state.clone();
        cached.conf_changes += 1;
        self.wal.lock().stage(&WalRecord {
            conf_state: Some(encode(conf_state)),
            ..Default::default()
        });
        drop(cached);
        self.sync()
    }

    /// Writes everything staged and waits until it is on disk. Records
    /// staged meanwhile wait for the next sync.
    pub fn sync(&self) -> Result<()> {
        if let Some(failpoints) = &self.failpoints {
            if self.wal.lock().has_pending() {
                failpoints.before_log_sync();
            }
        }
        let _io = self.io.lock();
        let staged = self.wal.lock().take_staged();
        staged.write()?;
        self.wal.lock().give_back(staged);
        Ok(())
    }

    /// Drops entries up to and including `index`. The caller has made the
    /// state machine durable past `index`, so they are never replayed again.
    /// The file is rewritten with what remains.
    pub fn truncate_front(&self, index: u64) -> Result<()> {
        let _io = self.io.lock();
        let mut cached = self.cached.write();
        if index <= cached.truncated_index || index > cached.last_index() {
            return Ok(());
        }
        let term = cached.entries[(index - cached.truncated_index - 1) as usize].term;
        cached.truncate(Position { index, term });
        self.wal.lock().rewrite(&cached.full_record())
    }

    pub fn first_index(&self) -> u64 {
        self.cached.read().truncated_index + 1
    }

    /// The payload bytes of the entries in memory.
    pub fn entry_bytes(&self) -> usize {
        self.cached.read().bytes()
    }

    /// Where to truncate so that at most `max_entries` entries and
    /// `max_bytes` bytes up to `upto` stay (see [`Cached::cut_keeping`]).
    pub fn cut_keeping(&self, upto: u64, max_entries: u64, max_bytes: usize) -> u64 {
        self.cached.read().cut_keeping(upto, max_entries, max_bytes)
    }

    /// Brings over the log an earlier version kept in the backend's raft
    /// space, once, when this file is still empty.
    pub fn import_legacy(&self, backend: &dyn Backend) -> Result<()> {
        if self.is_initialized() {
            return Ok(());
        }
        let Some(conf_state) = backend.get(Space::Raft, b"s/conf_state")? else {
            return Ok(());
        };
        let _io = self.io.lock();
        let mut cached = self.cached.write();
        cached.conf_state = decode(&conf_state)?;
        if let Some(bytes) = backend.get(Space::Raft, b"s/hard_state")? {
            cached.hard_state = decode(&bytes)?;
        }
        if let Some(bytes) = backend.get(Space::Raft, b"s/truncated")? {
            let position = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok());
            let (Some(index), Some(term)) = (position(0), position(8)) else {
                return Err(StoreError::Corrupt("legacy truncation marker".into()));
            };
            cached.truncated_index = u64::from_be_bytes(index);
            cached.truncated_term = u64::from_be_bytes(term);
        }
        let mut start = vec![b'e'];
        start.extend_from_slice(&(cached.truncated_index + 1).to_be_bytes());
        let stored = backend.scan(Space::Raft, &start, Some(b"f"))?;
        let entries = stored
            .iter()
            .map(|(_, value)| decode::<Entry>(value))
            .collect::<Result<Vec<_>>>()?;
        cached.splice(entries)?;
        tracing::info!(
            last = cached.last_index(),
            "imported the raft log from the backend"
        );
        self.wal.lock().rewrite(&cached.full_record())
    }

    /// Stages a snapshot's metadata in the backend's raft space, to be
    /// flushed with the state machine the snapshot restored.
    pub fn record_snapshot_meta(backend: &dyn Backend, meta: &SnapshotMetadata) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put(SNAPSHOT_META_KEY.to_vec(), encode(meta));
        backend.write(Space::Raft, batch)
    }

    /// If the state machine is ahead of the log, a snapshot was installed
    /// and flushed but the process died before the log dropped its entries:
    /// finishes that, from the metadata kept beside the state machine.
    pub fn finish_interrupted_snapshot(&self, backend: &dyn Backend, applied: u64) -> Result<()> {
        if applied <= self.last_index() {
            return Ok(());
        }
        let meta: SnapshotMetadata = match backend.get(Space::Raft, SNAPSHOT_META_KEY)? {
            Some(bytes) => decode(&bytes)?,
            None => SnapshotMetadata::default(),
        };
        if meta.index != applied {
            return Err(StoreError::Corrupt(format!(
                "state machine applied {applied}, beyond the raft log's last entry {}",
                self.last_index()
            )));
        }
        tracing::info!(index = applied, "finishing an interrupted snapshot install");
        let mut snapshot = Snapshot::default();
        snapshot.set_metadata(meta);
        self.apply_snapshot(&snapshot)
    }

    /// Removes a finished snapshot cut nobody asked for in a while.
    pub fn drop_unclaimed_snapshot(&self) {
        if let Some(cutter) = &self.cutter {
            cutter.drop_unclaimed(UNCLAIMED_FOR);
        }
    }
}

impl Storage for RaftLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let cached = self.cached.read();
        Ok(RaftState::new(
            cached.hard_state.clone(),
            cached.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let cached = self.cached.read();
        if low <= cached.truncated_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > cached.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let max_size = max_size.into().unwrap_or(u64::MAX);
        let from = (low - cached.truncated_index - 1) as usize;
        let to = (high - cached.truncated_index - 1) as usize;
        let mut entries = Vec::with_capacity(to - from);
        let mut size = 0u64;
        for entry in cached.entries.range(from..to) {
            size += (entry.data.len() + entry.context.len()) as u64;
            // Always return at least one entry, as raft requires.
            if !entries.is_empty() && size > max_size {
                break;
            }
            entries.push(entry.clone());
        }
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        let cached = self.cached.read();
        if index == cached.truncated_index {
            return Ok(cached.truncated_term);
        }
        if index < cached.truncated_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        let offset = (index - cached.truncated_index - 1) as usize;
        cached
            .entries
            .get(offset)
            .map(|entry| entry.term)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(RaftLog::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.cached.read().last_index())
    }

    /// A snapshot of the state machine for a peer too far behind for the
    /// log, cut beside the Ready loop (see `snapshot_cut.rs`): until it is
    /// ready, raft is told to ask again. The snapshot's data only names the
    /// file it went to (see `crate::snapshot`); the transport streams it.
    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let unavailable = || raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable);
        let cutter = self.cutter.as_ref().ok_or_else(unavailable)?;
        let position = LogPosition {
            conf_changes: self.cached.read().conf_changes,
            term_of: &|index| self.term(index).ok(),
            conf_state: &|| self.conf_state(),
        };
        cutter.snapshot(request_index, position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.data = vec![index as u8].into();
        e
    }

    fn all_terms(log: &RaftLog) -> Vec<u64> {
        let low = Storage::first_index(log).unwrap();
        let high = Storage::last_index(log).unwrap() + 1;
        log.entries(low, high, None, GetEntriesContext::empty(false))
            .unwrap()
            .iter()
            .map(|e| e.term)
            .collect()
    }

    #[test]
    fn append_replaces_conflicting_suffix_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let log = RaftLog::open(&path).unwrap();
        log.append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
            .unwrap();
        log.append(&[entry(2, 2)]).unwrap();
        assert_eq!(Storage::last_index(&log).unwrap(), 2);
        assert_eq!(log.term(2).unwrap(), 2);
        let mut hs = HardState::default();
        hs.term = 2;
        hs.commit = 2;
        log.set_hard_state(&hs).unwrap();
        log.sync().unwrap();
        // Staged but never synced: lost, as after a crash.
        log.append(&[entry(3, 2)]).unwrap();
        drop(log);
        let log = RaftLog::open(&path).unwrap();
        assert_eq!(Storage::last_index(&log).unwrap(), 2);
        assert_eq!(log.hard_state().commit, 2);
        assert_eq!(all_terms(&log), vec![1, 2]);
    }

    #[test]
    fn truncating_the_front_keeps_the_boundary_term() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let log = RaftLog::open(&path).unwrap();
        log.append(&[entry(1, 1), entry(2, 1), entry(3, 2)])
            .unwrap();
        log.truncate_front(2).unwrap();
        assert_eq!(Storage::first_index(&log).unwrap(), 3);
        assert_eq!(log.term(2).unwrap(), 1);
        assert!(log.term(1).is_err());
        log.append(&[entry(4, 2)]).unwrap();
        log.sync().unwrap();
        let log = RaftLog::open(&path).unwrap();
        assert_eq!(Storage::first_index(&log).unwrap(), 3);
        assert_eq!(log.term(3).unwrap(), 2);
        assert_eq!(all_terms(&log), vec![2, 2]);
    }

    #[test]
    fn a_log_kept_in_the_backend_is_imported_once() {
        let dir = tempfile::tempdir().unwrap();
        let backend = crate::storage::SledBackend::open(&dir.path().join("db")).unwrap();
        let mut conf_state = ConfState::default();
        conf_state.voters = vec![3];
        let mut batch = WriteBatch::default();
        batch.put(b"s/conf_state".to_vec(), encode(&conf_state));
        let mut marker = 1u64.to_be_bytes().to_vec();
        marker.extend_from_slice(&1u64.to_be_bytes());
        batch.put(b"s/truncated".to_vec(), marker);
        for e in [entry(2, 1), entry(3, 2)] {
            let mut key = vec![b'e'];
            key.extend_from_slice(&e.index.to_be_bytes());
            batch.put(key, encode(&e));
        }
        backend.write(Space::Raft, batch).unwrap();
        let path = dir.path().join("wal");
        let log = RaftLog::open(&path).unwrap();
        log.import_legacy(&backend).unwrap();
        let log = RaftLog::open(&path).unwrap();
        assert_eq!(log.conf_state().voters, vec![3]);
        assert_eq!(all_terms(&log), vec![1, 2]);
        log.append(&[entry(4, 2)]).unwrap();
        log.sync().unwrap();
        log.import_legacy(&backend).unwrap();
        assert_eq!(Storage::last_index(&log).unwrap(), 4);
    }

    #[test]
    fn a_snapshot_replaces_the_log_and_the_conf_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let log = RaftLog::open(&path).unwrap();
        assert!(!log.is_initialized());
        log.bootstrap(vec![7]).unwrap();
        log.append(&[entry(2, 1), entry(3, 1)]).unwrap();
        log.sync().unwrap();
        let mut snapshot = Snapshot::default();
        let meta = snapshot.mut_metadata();
        meta.index = 10;
        meta.term = 3;
        meta.mut_conf_state().voters = vec![7, 8];
        log.apply_snapshot(&snapshot).unwrap();
        let log = RaftLog::open(&path).unwrap();
        assert_eq!(log.conf_state().voters, vec![7, 8]);
        assert_eq!(Storage::first_index(&log).unwrap(), 11);
        assert_eq!(log.term(10).unwrap(), 3);
        assert_eq!(log.hard_state().commit, 10);
    }
}
