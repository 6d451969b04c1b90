//! The in-memory state of the MVCC store (the key index and the revision
//! counters), how it is rebuilt from the backend, and the read helpers that
//! both reads and write views use.

use capstan_proto::internal::StoredRevision;
use capstan_proto::mvccpb::KeyValue;
use prost::Message;

use super::index::KeyIndex;
use super::key_history::LiveMeta;
use super::revision::REVISION_PREFIX;
use super::{KeyRange, Revision};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space};

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
    let mut index = KeyIndex::default();
    let mut last_main = 1;
    let start = [REVISION_PREFIX];
    let end = [REVISION_PREFIX + 1];
    for (key, value) in backend.scan(Space::Mvcc, &start, Some(&end))? {
        let rev = Revision::from_key(&key)
            .ok_or_else(|| StoreError::Corrupt(format!("revision key {key:?}")))?;
        let stored = decode_revision(&value)?;
        let kv = stored.kv.unwrap_or_default();
        if stored.tombstone {
            index.record_delete(&kv.key, rev);
        } else {
            let meta = LiveMeta {
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                lease: kv.lease,
            };
            index.restore_put(&kv.key, rev, meta);
        }
        last_main = rev.main;
    }
    let current_rev = read_i64(backend, META_CURRENT_REV)?
        .unwrap_or(1)
        .max(last_main);
    let compact_rev = read_i64(backend, META_COMPACT_REV)?.unwrap_or(0);
    Ok(State {
        index,
        current_rev,
        compact_rev,
    })
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
