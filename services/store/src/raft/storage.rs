//! The raft log, hard state and conf state, kept in the backend's raft space.
//!
//! Implements raft-rs's [`Storage`]. Writes go through [`RaftLog::append`]
//! and friends, which only stage them in the backend; the node's Ready loop
//! makes them durable with one flush per Ready before acknowledging anything.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::RwLock;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use crate::error::{Result, StoreError};
use crate::mvcc::MvccStore;
use crate::storage::{Backend, Space, WriteBatch};

const ENTRY_PREFIX: u8 = b'e';
/// Where the log of a new cluster starts (see [`RaftLog::bootstrap`]).
pub const BOOTSTRAP_INDEX: u64 = 1;
const HARD_STATE_KEY: &[u8] = b"s/hard_state";
const CONF_STATE_KEY: &[u8] = b"s/conf_state";
/// Index and term of the last entry dropped from the front of the log.
const TRUNCATED_KEY: &[u8] = b"s/truncated";

fn entry_key(index: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = ENTRY_PREFIX;
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

fn encode<M: protobuf::Message>(message: &M) -> Vec<u8> {
    message
        .write_to_bytes()
        .expect("raft message encodes to a vec")
}

fn decode<M: protobuf::Message>(bytes: &[u8]) -> Result<M> {
    M::parse_from_bytes(bytes).map_err(|err| StoreError::Corrupt(err.to_string()))
}

/// What the log keeps in memory: state, bounds and the terms of its entries
/// (raft asks for terms constantly; they are 8 bytes each).
struct Cached {
    hard_state: HardState,
    conf_state: ConfState,
    truncated_index: u64,
    truncated_term: u64,
    /// `terms[i]` is the term of entry `truncated_index + 1 + i`.
    terms: VecDeque<u64>,
}

impl Cached {
    fn last_index(&self) -> u64 {
        self.truncated_index + self.terms.len() as u64
    }
}

/// The raft log of this member. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct RaftLog {
    backend: Arc<dyn Backend>,
    cached: Arc<RwLock<Cached>>,
    /// The state machine a snapshot for a lagging peer is cut from.
    state_machine: Option<Arc<MvccStore>>,
}

impl RaftLog {
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self> {
        let hard_state = match backend.get(Space::Raft, HARD_STATE_KEY)? {
            Some(bytes) => decode(&bytes)?,
            None => HardState::default(),
        };
        let conf_state = match backend.get(Space::Raft, CONF_STATE_KEY)? {
            Some(bytes) => decode(&bytes)?,
            None => ConfState::default(),
        };
        let (truncated_index, truncated_term) = match backend.get(Space::Raft, TRUNCATED_KEY)? {
            Some(bytes) if bytes.len() == 16 => (
                u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")),
                u64::from_be_bytes(bytes[8..].try_into().expect("8 bytes")),
            ),
            _ => (0, 0),
        };
        let mut terms = VecDeque::new();
        let start = entry_key(truncated_index + 1);
        let end = [ENTRY_PREFIX + 1];
        let stored = backend.scan(Space::Raft, &start, Some(&end))?;
        for (expected, (_, value)) in (truncated_index + 1..).zip(stored) {
            let entry: Entry = decode(&value)?;
            if entry.index != expected {
                return Err(StoreError::Corrupt(format!(
                    "raft log gap: expected entry {expected}, found {}",
                    entry.index
                )));
            }
            terms.push_back(entry.term);
        }
        let cached = Cached {
            hard_state,
            conf_state,
            truncated_index,
            truncated_term,
            terms,
        };
        Ok(RaftLog {
            backend,
            cached: Arc::new(RwLock::new(cached)),
            state_machine: None,
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

    pub fn with_state_machine(mut self, mvcc: Arc<MvccStore>) -> Self {
        self.state_machine = Some(mvcc);
        self
    }

    /// Replaces the whole log with a snapshot's position: every entry goes,
    /// the log now starts right after the snapshot.
    pub fn apply_snapshot(&self, snapshot: &Snapshot) -> Result<()> {
        let meta = snapshot.get_metadata();
        let mut cached = self.cached.write();
        let mut batch = WriteBatch::default();
        for index in (cached.truncated_index + 1)..=cached.last_index() {
            batch.delete(entry_key(index).to_vec());
        }
        let mut marker = meta.index.to_be_bytes().to_vec();
        marker.extend_from_slice(&meta.term.to_be_bytes());
        batch.put(TRUNCATED_KEY.to_vec(), marker);
        batch.put(CONF_STATE_KEY.to_vec(), encode(meta.get_conf_state()));
        let mut hard_state = cached.hard_state.clone();
        hard_state.commit = hard_state.commit.max(meta.index);
        hard_state.term = hard_state.term.max(meta.term);
        batch.put(HARD_STATE_KEY.to_vec(), encode(&hard_state));
        self.backend.write(Space::Raft, batch)?;
        cached.terms.clear();
        cached.truncated_index = meta.index;
        cached.truncated_term = meta.term;
        cached.conf_state = meta.get_conf_state().clone();
        cached.hard_state = hard_state;
        Ok(())
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
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let mut cached = self.cached.write();
        if first.index <= cached.truncated_index {
            return Err(StoreError::Corrupt(format!(
                "append at {} behind truncated log {}",
                first.index, cached.truncated_index
            )));
        }
        let mut batch = WriteBatch::default();
        let old_last = cached.last_index();
        let new_last = entries.last().expect("non-empty").index;
        for index in (new_last + 1)..=old_last {
            batch.delete(entry_key(index).to_vec());
        }
        for entry in entries {
            batch.put(entry_key(entry.index).to_vec(), encode(entry));
        }
        self.backend.write(Space::Raft, batch)?;
        let keep = (first.index - cached.truncated_index - 1) as usize;
        cached.terms.truncate(keep);
        cached.terms.extend(entries.iter().map(|e| e.term));
        Ok(())
    }

    pub fn set_hard_state(&self, hard_state: &HardState) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put(HARD_STATE_KEY.to_vec(), encode(hard_state));
        self.backend.write(Space::Raft, batch)?;
        self.cached.write().hard_state = hard_state.clone();
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

    pub fn set_conf_state(&self, conf_state: &ConfState) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.put(CONF_STATE_KEY.to_vec(), encode(conf_state));
        self.backend.write(Space::Raft, batch)?;
        self.cached.write().conf_state = conf_state.clone();
        Ok(())
    }

    /// Drops entries up to and including `index` (already applied and
    /// flushed), keeping the log from growing without bound.
    pub fn truncate_front(&self, index: u64) -> Result<()> {
        let mut cached = self.cached.write();
        if index <= cached.truncated_index || index > cached.last_index() {
            return Ok(());
        }
        let term = cached.terms[(index - cached.truncated_index - 1) as usize];
        let mut batch = WriteBatch::default();
        for i in (cached.truncated_index + 1)..=index {
            batch.delete(entry_key(i).to_vec());
        }
        let mut marker = index.to_be_bytes().to_vec();
        marker.extend_from_slice(&term.to_be_bytes());
        batch.put(TRUNCATED_KEY.to_vec(), marker);
        self.backend.write(Space::Raft, batch)?;
        let drop = (index - cached.truncated_index) as usize;
        cached.terms.drain(..drop);
        cached.truncated_index = index;
        cached.truncated_term = term;
        Ok(())
    }

    pub fn first_index(&self) -> u64 {
        self.cached.read().truncated_index + 1
    }
}

fn storage_err(err: StoreError) -> raft::Error {
    raft::Error::Store(StorageError::Other(Box::new(err)))
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
        {
            let cached = self.cached.read();
            if low <= cached.truncated_index {
                return Err(raft::Error::Store(StorageError::Compacted));
            }
            if high > cached.last_index() + 1 {
                return Err(raft::Error::Store(StorageError::Unavailable));
            }
        }
        let max_size = max_size.into().unwrap_or(u64::MAX);
        let pairs = self
            .backend
            .scan(Space::Raft, &entry_key(low), Some(&entry_key(high)))
            .map_err(storage_err)?;
        let mut entries = Vec::with_capacity(pairs.len());
        let mut size = 0u64;
        for (_, value) in pairs {
            size += value.len() as u64;
            // Always return at least one entry, as raft requires.
            if !entries.is_empty() && size > max_size {
                break;
            }
            entries.push(decode::<Entry>(&value).map_err(storage_err)?);
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
            .terms
            .get(offset)
            .copied()
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(RaftLog::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.cached.read().last_index())
    }

    /// Cuts a snapshot of the state machine at the applied index for a peer
    /// that is too far behind for the log. Runs on the raft thread, which is
    /// also the only writer, so the dump is consistent with its index.
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let unavailable = || raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable);
        let mvcc = self.state_machine.as_ref().ok_or_else(unavailable)?;
        let applied = mvcc.applied_index().map_err(storage_err)?;
        let term = self.term(applied).map_err(|_| unavailable())?;
        let data = mvcc.dump().map_err(storage_err)?;
        let mut snapshot = Snapshot::default();
        snapshot.data = data.into();
        let meta = snapshot.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(self.conf_state());
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SledBackend;

    fn entry(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.data = vec![index as u8].into();
        e
    }

    #[test]
    fn append_replaces_conflicting_suffix_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let log = RaftLog::open(backend.clone()).unwrap();
        log.append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
            .unwrap();
        log.append(&[entry(2, 2)]).unwrap();
        assert_eq!(Storage::last_index(&log).unwrap(), 2);
        assert_eq!(log.term(2).unwrap(), 2);
        let mut hs = HardState::default();
        hs.term = 2;
        hs.commit = 2;
        log.set_hard_state(&hs).unwrap();
        backend.flush().unwrap();
        drop(log);
        let log = RaftLog::open(backend).unwrap();
        assert_eq!(Storage::last_index(&log).unwrap(), 2);
        assert_eq!(log.hard_state().commit, 2);
        let entries = log
            .entries(1, 3, None, GetEntriesContext::empty(false))
            .unwrap();
        assert_eq!(
            entries.iter().map(|e| e.term).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn truncating_the_front_keeps_the_boundary_term() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let log = RaftLog::open(backend.clone()).unwrap();
        log.append(&[entry(1, 1), entry(2, 1), entry(3, 2)])
            .unwrap();
        log.truncate_front(2).unwrap();
        assert_eq!(Storage::first_index(&log).unwrap(), 3);
        assert_eq!(log.term(2).unwrap(), 1);
        assert!(log.term(1).is_err());
        let log = RaftLog::open(backend).unwrap();
        assert_eq!(Storage::first_index(&log).unwrap(), 3);
        assert_eq!(log.term(3).unwrap(), 2);
    }
}
