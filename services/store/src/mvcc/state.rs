//! The in-memory state of the MVCC store (the key index and the revision
//! counters), how it is rebuilt from the backend, and the read helpers that
//! both reads and write views use.

use capstan_proto::internal::StoredRevision;
use capstan_proto::mvccpb::KeyValue;
use prost::Message;

use super::index::KeyIndex;
use super::key_history::LiveMeta;
use super::key_range::KeyRange;
use super::revision::{Revision, REVISION_PREFIX};
use crate::error::{Result, StoreError};
use crate::storage::{for_each_pair, Backend, Space};

/// Revision records read at a time when the index is rebuilt.
const LOAD_PAGE: usize = 16_384;

/// The raft index of the last entry whose effects are in the MVCC space.
/// Written in the same atomic batch as those effects.
pub const META_APPLIED_INDEX: &[u8] = b"m/applied_index";
pub const META_CURRENT_REV: &[u8] = b"m/current_rev";
pub const META_COMPACT_REV: &[u8] = b"m/compact_rev";

pub struct State {
    pub(super) index: KeyIndex,
    /// The newest store revision; 1 for an empty store, as in etcd.
    pub(super) current_rev: i64,
    /// Reads below this revision fail with `Compacted`.
    pub(super) compact_rev: i64,
}

/// The result of a range read.
#[derive(Debug, Default)]
pub struct RangeOutput {
    pub kvs: Vec<KeyValue>,
    /// Keys in the range at the read revision, ignoring the limit.
    pub count: i64,
    /// The store's current revision when the read happened.
    pub current_rev: i64,
}

pub(crate) fn read_i64(backend: &dyn Backend, key: &[u8]) -> Result<Option<i64>> {
    match backend.get(Space::Mvcc, key)? {
        Some(bytes) => decode_i64(key, &bytes).map(Some),
        None => Ok(None),
    }
}

/// The value of the meta record `key`.
pub(super) fn decode_i64(key: &[u8], bytes: &[u8]) -> Result<i64> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt(format!("meta {key:?}")))?;
    Ok(i64::from_be_bytes(arr))
}

pub(super) fn decode_revision(bytes: &[u8]) -> Result<StoredRevision> {
    Ok(StoredRevision::decode(bytes)?)
}

/// Rebuilds the in-memory state from the backend's MVCC space.
pub(super) fn load_state(backend: &dyn Backend) -> Result<State> {
    let mut builder = StateBuilder::default();
    let start = [REVISION_PREFIX];
    let end = [REVISION_PREFIX + 1];
    for_each_pair(
        backend,
        Space::Mvcc,
        &start,
        Some(&end),
        LOAD_PAGE,
        |key, value| builder.add(&key, &value),
    )?;
    for meta in [META_CURRENT_REV, META_COMPACT_REV] {
        if let Some(value) = backend.get(Space::Mvcc, meta)? {
            builder.add(meta, &value)?;
        }
    }
    Ok(builder.finish())
}

/// The in-memory state built from the MVCC space's records as they go by,
/// revision records in revision order: at start-up from the backend, and
/// while a snapshot is installed from the snapshot's records, so that an
/// install need not read back everything it has just written.
#[derive(Default)]
pub(super) struct StateBuilder {
    index: KeyIndex,
    last: Option<Revision>,
    current_rev: Option<i64>,
    compact_rev: Option<i64>,
}

impl StateBuilder {
    /// Takes in one record; those that are not revisions or revision
    /// counters leave the state as it is.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.first() == Some(&REVISION_PREFIX) {
            return self.add_revision(key, value);
        }
        if key == META_CURRENT_REV {
            self.current_rev = Some(decode_i64(key, value)?);
        } else if key == META_COMPACT_REV {
            self.compact_rev = Some(decode_i64(key, value)?);
        }
        Ok(())
    }

    fn add_revision(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let rev = Revision::from_key(key)
            .ok_or_else(|| StoreError::Corrupt(format!("revision key {key:?}")))?;
        if self.last.is_some_and(|last| rev <= last) {
            return Err(StoreError::Corrupt(format!(
                "revision {rev:?} out of order, after {:?}",
                self.last
            )));
        }
        let stored = decode_revision(value)?;
        let kv = stored.kv.unwrap_or_default();
        if stored.tombstone {
            self.index.record_delete(&kv.key, rev);
        } else {
            let meta = LiveMeta {
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                lease: kv.lease,
            };
            self.index.restore_put(&kv.key, rev, meta);
        }
        self.last = Some(rev);
        Ok(())
    }

    pub fn finish(self) -> State {
        State {
            index: self.index,
            current_rev: self
                .current_rev
                .unwrap_or(1)
                .max(self.last.map_or(1, |last| last.main)),
            compact_rev: self.compact_rev.unwrap_or(0),
        }
    }
}

pub(super) fn check_read_revision(state: &State, at: i64) -> Result<i64> {
    if at <= 0 {
        return Ok(state.current_rev);
    }
    if at > state.current_rev {
        return Err(StoreError::FutureRevision);
    }
    if at < state.compact_rev {
        return Err(StoreError::Compacted);
    }
    Ok(at)
}

pub(super) fn collect_revisions(
    index: &KeyIndex,
    range: &KeyRange,
    at: i64,
    limit: usize,
) -> (Vec<Revision>, i64) {
    let mut revs = Vec::new();
    let mut count = 0i64;
    index.visit_at(range, at, |_, rev| {
        count += 1;
        if limit == 0 || revs.len() < limit {
            revs.push(rev);
        }
        true
    });
    (revs, count)
}
