//! [`MvccStore`]: reads at any retained revision, and write views that turn a
//! batch of changes into one new store revision.

use std::sync::Arc;

use capstan_proto::mvccpb::{event::EventType, Event, KeyValue};
use parking_lot::RwLock;

use super::compactor::Compactor;
use super::key_range::KeyRange;
use super::revision::{Revision, REVISION_PREFIX};
use super::state::{
    check_read_revision, collect_revisions, decode_revision, load_state, read_i64, RangeOutput,
    State, META_APPLIED_INDEX,
};
use super::write::{WriteGroup, WriteView};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space};

pub struct MvccStore {
    pub(super) backend: Arc<dyn Backend>,
    /// Shared with the compactor, which compacts the index a slice at a
    /// time under the write lock.
    pub(super) state: Arc<RwLock<State>>,
    /// Held shared by dumps, which read revision records without the
    /// state's lock (see `dump.rs`), and exclusively by whatever removes
    /// revision records: the compactor's deletions and restores. Taken
    /// before `state`.
    pub(super) removals: Arc<RwLock<()>>,
    compactor: Compactor,
}

impl MvccStore {
    /// Opens the store and rebuilds the key index from the revision records.
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self> {
        let state = Arc::new(RwLock::new(load_state(&*backend)?));
        let removals = Arc::new(RwLock::new(()));
        let compactor = Compactor::start(state.clone(), backend.clone(), removals.clone())?;
        let store = MvccStore {
            backend,
            state,
            removals,
            compactor,
        };
        store.resume_compaction(&store.state.read());
        Ok(store)
    }

    /// Replaces the state with the one in the backend (after a restore).
    /// The records loaded are all in the index, also those a compaction
    /// had not deleted yet (a restart cut it short, or it was under way
    /// when a snapshot was cut): compacting again deletes them.
    pub(super) fn resume_compaction(&self, state: &State) {
        if state.compact_rev > 0 {
            self.compactor.schedule(state.compact_rev);
        }
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn current_revision(&self) -> i64 {
        self.state.read().current_rev
    }

    pub fn compact_revision(&self) -> i64 {
        self.state.read().compact_rev
    }

    /// Waits until the records the compaction at `at` made unreachable are
    /// deleted from the backend, not only from the index.
    pub async fn wait_compacted(&self, at: i64) {
        self.compactor.wait_finished(at).await
    }

    /// [`MvccStore::wait_compacted`] for the current compaction revision,
    /// from a test's thread.
    #[cfg(test)]
    pub fn settle_compaction(&self) {
        let at = self.compact_revision();
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime for the test")
            .block_on(self.wait_compacted(at));
    }

    pub fn applied_index(&self) -> Result<u64> {
        Ok(read_i64(&*self.backend, META_APPLIED_INDEX)?.unwrap_or(0) as u64)
    }

    /// Reads `range` at revision `at` (≤ 0: the current revision), returning
    /// at most `limit` pairs (0: all) but counting every key.
    pub fn range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
        let (revs, count, current_rev, read_rev) = {
            let state = self.state.read();
            let read_rev = check_read_revision(&state, at)?;
            let (revs, count) = collect_revisions(&state.index, range, read_rev, limit);
            (revs, count, state.current_rev, read_rev)
        };
        Ok(RangeOutput {
            kvs: self.values_of(revs, read_rev)?,
            count,
            current_rev,
        })
    }

    /// The first `limit` keys of `range` at `at` in the order of their
    /// modification revisions (newest first if `newest_first`), as a read
    /// of the whole range sorted by `mod_revision` would give them: the
    /// index orders them, so only the values returned are read. (A
    /// consistent list asks for the newest key of a whole resource type.)
    pub fn range_by_modification(
        &self,
        range: &KeyRange,
        at: i64,
        newest_first: bool,
        limit: usize,
    ) -> Result<RangeOutput> {
        let (mut revs, count, current_rev, read_rev) = {
            let state = self.state.read();
            let read_rev = check_read_revision(&state, at)?;
            let (revs, count) = collect_revisions(&state.index, range, read_rev, 0);
            (revs, count, state.current_rev, read_rev)
        };
        // A stable sort, reversed, as the sort of full key-values does: keys
        // changed by one request keep (or reverse) their key order.
        revs.sort_by_key(|rev| rev.main);
        if newest_first {
            revs.reverse();
        }
        revs.truncate(limit);
        Ok(RangeOutput {
            kvs: self.values_of(revs, read_rev)?,
            count,
            current_rev,
        })
    }

    /// The key-values written at `revs`, read without the lock: a revision
    /// record never changes, and one can only disappear if a compaction
    /// passed `read_rev`.
    fn values_of(&self, revs: Vec<Revision>, read_rev: i64) -> Result<Vec<KeyValue>> {
        let mut kvs = Vec::with_capacity(revs.len());
        for rev in revs {
            match self.kv_at(rev)? {
                Some(kv) => kvs.push(kv),
                None if self.compact_revision() > read_rev => return Err(StoreError::Compacted),
                None => return Err(StoreError::Corrupt(format!("missing revision {rev:?}"))),
            }
        }
        Ok(kvs)
    }

    /// The key-value written at `rev`, if the record still exists.
    pub fn kv_at(&self, rev: Revision) -> Result<Option<KeyValue>> {
        match self.backend.get(Space::Mvcc, &rev.to_key())? {
            Some(bytes) => Ok(decode_revision(&bytes)?.kv),
            None => Ok(None),
        }
    }

    /// The events of store revisions `from..=to` in order, with previous
    /// values, for watch catch-up. Fails with `Compacted` below the
    /// compaction point.
    pub fn events_between(
        &self,
        from: i64,
        to: i64,
        max_revisions: i64,
    ) -> Result<Vec<(i64, Vec<Event>)>> {
        let to = to.min(from.saturating_add(max_revisions - 1));
        if from > to {
            return Ok(Vec::new());
        }
        if from < self.compact_revision() {
            return Err(StoreError::Compacted);
        }
        let records = self.backend.scan(
            Space::Mvcc,
            &Revision::first_key_of(from),
            Some(&Revision::first_key_of(to + 1)),
        )?;
        let mut out: Vec<(i64, Vec<Event>)> = Vec::new();
        for (key, value) in records {
            let rev = Revision::from_key(&key)
                .ok_or_else(|| StoreError::Corrupt(format!("revision key {key:?}")))?;
            let stored = decode_revision(&value)?;
            let kv = stored.kv.unwrap_or_default();
            let prev_kv = self.previous_kv(&kv.key, rev)?;
            let kind = if stored.tombstone {
                EventType::Delete
            } else {
                EventType::Put
            };
            let event = Event {
                r#type: kind as i32,
                kv: Some(kv),
                prev_kv,
            };
            match out.last_mut() {
                Some((main, events)) if *main == rev.main => events.push(event),
                _ => out.push((rev.main, vec![event])),
            }
        }
        Ok(out)
    }

    fn previous_kv(&self, key: &[u8], rev: Revision) -> Result<Option<KeyValue>> {
        let prev = {
            let state = self.state.read();
            state.index.history(key).and_then(|h| h.visible_before(rev))
        };
        match prev {
            Some(prev) => self.kv_at(prev),
            None => Ok(None),
        }
    }

    /// A hash of every revision record up to `at` (≤ 0: current), for
    /// comparing members. Returns the hash and the compaction revision.
    pub fn hash_kv(&self, at: i64) -> Result<(u32, i64, i64)> {
        let (compact_rev, at) = {
            let state = self.state.read();
            (state.compact_rev, check_read_revision(&state, at)?)
        };
        let mut hasher = crc32fast::Hasher::new();
        let records = self.backend.scan(
            Space::Mvcc,
            &[REVISION_PREFIX],
            Some(&Revision::first_key_of(at + 1)),
        )?;
        for (key, value) in records {
            if !self.reachable(&key, &value, compact_rev)? {
                continue; // compacted, its deletion still under way
            }
            hasher.update(&key);
            hasher.update(&value);
        }
        Ok((hasher.finalize(), compact_rev, at))
    }

    /// Whether a revision record is still part of the history: above the
    /// compaction revision every record is; at or below it only those the
    /// compaction keeps. Members compact at their own pace, so anything
    /// that compares members must skip the others (as etcd's hash skips
    /// revisions its compaction does not keep).
    fn reachable(&self, key: &[u8], value: &[u8], compact_rev: i64) -> Result<bool> {
        let rev = Revision::from_key(key)
            .ok_or_else(|| StoreError::Corrupt(format!("revision key {key:?}")))?;
        if rev.main > compact_rev {
            return Ok(true);
        }
        let kv_key = decode_revision(value)?.kv.unwrap_or_default().key;
        let state = self.state.read();
        Ok(state
            .index
            .history(&kv_key)
            .is_some_and(|h| h.keeps(rev, compact_rev)))
    }

    /// Live keys in `[key, range_end)` that carry a lease, with the lease id.
    pub fn leased_keys(&self, key: &[u8], range_end: &[u8]) -> Vec<(Vec<u8>, i64)> {
        let state = self.state.read();
        state
            .index
            .live_in(&KeyRange::new(key, range_end))
            .into_iter()
            .filter(|(_, meta)| meta.lease != 0)
            .map(|(key, meta)| (key, meta.lease))
            .collect()
    }

    /// Starts the changes of one store revision, written on its own.
    pub fn write(&self) -> WriteView<'_> {
        self.write_group().view()
    }

    /// Starts changes of many store revisions (one per applied entry),
    /// written to the backend in one batch by [`WriteGroup::commit`]. Only
    /// the apply loop writes; readers wait for the group to be committed.
    pub fn write_group(&self) -> WriteGroup<'_> {
        WriteGroup::new(self.state.write(), &*self.backend, &self.compactor)
    }
}

#[cfg(test)]
mod tests {
    use capstan_proto::internal::StoredRevision;
    use prost::Message;

    use super::*;
    use crate::storage::{SledBackend, WriteBatch};

    fn open(dir: &std::path::Path) -> MvccStore {
        MvccStore::open(Arc::new(SledBackend::reopen(dir))).unwrap()
    }

    fn all() -> KeyRange {
        KeyRange::new(b"\0", b"\0")
    }

    #[test]
    fn writes_advance_the_revision_once_per_view() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        assert_eq!(store.current_revision(), 1);
        let mut w = store.write();
        w.put(b"a", b"1".to_vec(), 0).unwrap();
        w.put(b"b", b"2".to_vec(), 0).unwrap();
        let done = w.finish(1).unwrap();
        assert_eq!(done.revision, 2);
        assert_eq!(done.events.len(), 2);
        let out = store.range(&all(), 0, 0).unwrap();
        assert_eq!(out.count, 2);
        assert!(out
            .kvs
            .iter()
            .all(|kv| kv.mod_revision == 2 && kv.version == 1));
    }

    #[test]
    fn view_without_changes_keeps_the_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.write();
        assert_eq!(w.delete(b"missing").unwrap(), None);
        assert_eq!(w.finish(1).unwrap().revision, 1);
    }

    #[test]
    fn historical_reads_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for (i, v) in ["1", "2", "3"].iter().enumerate() {
            let mut w = store.write();
            w.put(b"k", v.as_bytes().to_vec(), 0).unwrap();
            w.finish(i as u64 + 1).unwrap();
        }
        let key = KeyRange::new(b"k", b"");
        assert_eq!(store.range(&key, 2, 0).unwrap().kvs[0].value, b"1");
        assert_eq!(store.range(&key, 4, 0).unwrap().kvs[0].version, 3);
        assert_eq!(
            store.range(&key, 5, 0).unwrap_err(),
            StoreError::FutureRevision
        );

        let mut w = store.write();
        w.compact(3).unwrap();
        w.finish(4).unwrap();
        assert_eq!(store.range(&key, 2, 0).unwrap_err(), StoreError::Compacted);
        assert_eq!(store.range(&key, 3, 0).unwrap().kvs[0].value, b"2");
        let mut w = store.write();
        assert_eq!(w.compact(3).unwrap_err(), StoreError::Compacted);
    }

    #[test]
    fn compacted_records_leave_the_backend_and_a_restart_finishes_the_job() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for (i, v) in ["1", "2", "3", "4"].iter().enumerate() {
            let mut w = store.write();
            w.put(b"k", v.as_bytes().to_vec(), 0).unwrap();
            w.finish(i as u64 + 1).unwrap();
        }
        let mut w = store.write();
        w.compact(4).unwrap();
        w.finish(5).unwrap();
        store.settle_compaction();
        let revisions = |store: &MvccStore| -> Vec<i64> {
            let records = store.backend().scan(Space::Mvcc, &[REVISION_PREFIX], None);
            let records = records.unwrap().into_iter();
            records
                .filter_map(|(k, _)| Revision::from_key(&k))
                .map(|r| r.main)
                .collect()
        };
        // Revision 4 is what a read at the compaction point sees.
        assert_eq!(revisions(&store), vec![4, 5]);
        let (hash, compact_rev, _) = store.hash_kv(0).unwrap();
        assert_eq!(compact_rev, 4);

        // What a crash before the compactor got to a record leaves behind.
        let leftover = Revision::new(2, 0).to_key().to_vec();
        let stored = StoredRevision {
            kv: Some(KeyValue {
                key: b"k".to_vec(),
                mod_revision: 2,
                ..Default::default()
            }),
            tombstone: false,
        };
        let mut batch = WriteBatch::default();
        batch.put(leftover, stored.encode_to_vec());
        store.backend().write(Space::Mvcc, batch).unwrap();
        assert_eq!(revisions(&store), vec![2, 4, 5]);
        assert_eq!(store.hash_kv(0).unwrap().0, hash, "the hash skips it");
        store.backend().flush().unwrap();
        drop(store);

        let store = open(dir.path());
        store.settle_compaction();
        assert_eq!(revisions(&store), vec![4, 5]);
        assert_eq!(store.hash_kv(0).unwrap().0, hash);
        let key = KeyRange::new(b"k", b"");
        assert_eq!(store.range(&key, 4, 0).unwrap().kvs[0].value, b"3");
    }

    #[test]
    fn state_is_rebuilt_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            let mut w = store.write();
            w.put(b"a", b"1".to_vec(), 7).unwrap();
            w.finish(1).unwrap();
            let mut w = store.write();
            w.put(b"a", b"2".to_vec(), 7).unwrap();
            w.delete(b"a").unwrap();
            w.put(b"b", b"3".to_vec(), 0).unwrap();
            w.finish(2).unwrap();
            store.backend().flush().unwrap();
        }
        let store = open(dir.path());
        assert_eq!(store.current_revision(), 3);
        assert_eq!(store.applied_index().unwrap(), 2);
        let out = store.range(&all(), 0, 0).unwrap();
        assert_eq!(out.kvs.len(), 1);
        assert_eq!(out.kvs[0].key, b"b");
        let old = store.range(&KeyRange::new(b"a", b""), 2, 0).unwrap();
        assert_eq!(old.kvs[0].lease, 7);
    }

    #[test]
    fn dump_and_restore_reproduce_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let source = open(&dir.path().join("a"));
        let mut w = source.write();
        w.put(b"a", b"1".to_vec(), 0).unwrap();
        w.put(b"b", b"2".to_vec(), 0).unwrap();
        w.finish(5).unwrap();
        let target = open(&dir.path().join("b"));
        let mut w = target.write();
        w.put(b"stale", b"x".to_vec(), 0).unwrap();
        w.finish(1).unwrap();
        target.restore(&source.dump().unwrap()).unwrap();
        assert_eq!(target.current_revision(), 2);
        assert_eq!(target.applied_index().unwrap(), 5);
        let keys: Vec<_> = target
            .range(&all(), 0, 0)
            .unwrap()
            .kvs
            .into_iter()
            .map(|kv| kv.key)
            .collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn replayed_history_carries_previous_values() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut w = store.write();
        w.put(b"a", b"1".to_vec(), 0).unwrap();
        w.finish(1).unwrap();
        let mut w = store.write();
        w.delete(b"a").unwrap();
        w.finish(2).unwrap();
        let history = store.events_between(2, 3, 100).unwrap();
        assert_eq!(history.len(), 2);
        let (rev, events) = &history[1];
        assert_eq!(*rev, 3);
        assert_eq!(events[0].r#type, EventType::Delete as i32);
        assert_eq!(events[0].prev_kv.as_ref().unwrap().value, b"1");
    }
}
