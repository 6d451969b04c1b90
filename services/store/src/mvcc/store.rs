//! [`MvccStore`]: reads at any retained revision, and write views that turn a
//! batch of changes into one new store revision.

use std::collections::HashMap;
use std::sync::Arc;

use capstan_proto::internal::{SnapshotPair, StoredRevision};
use capstan_proto::mvccpb::{event::EventType, Event, KeyValue};
use parking_lot::{RwLock, RwLockWriteGuard};
use prost::Message;

use super::index::KeyIndex;
use super::key_history::LiveMeta;
use super::revision::REVISION_PREFIX;
use super::{KeyRange, Revision};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space, WriteBatch};

/// The raft index of the last entry whose effects are in the MVCC space.
/// Written in the same atomic batch as those effects.
pub const META_APPLIED_INDEX: &[u8] = b"m/applied_index";
const META_CURRENT_REV: &[u8] = b"m/current_rev";
const META_COMPACT_REV: &[u8] = b"m/compact_rev";

struct State {
    index: KeyIndex,
    /// The newest store revision; 1 for an empty store, as in etcd.
    current_rev: i64,
    /// Reads below this revision fail with `Compacted`.
    compact_rev: i64,
}

pub struct MvccStore {
    backend: Arc<dyn Backend>,
    state: RwLock<State>,
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
        Some(bytes) => {
            let arr: [u8; 8] = bytes
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Corrupt(format!("meta {key:?}")))?;
            Ok(Some(i64::from_be_bytes(arr)))
        }
        None => Ok(None),
    }
}

fn decode_revision(bytes: &[u8]) -> Result<StoredRevision> {
    Ok(StoredRevision::decode(bytes)?)
}

impl MvccStore {
    /// Opens the store and rebuilds the key index from the revision records.
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self> {
        let state = load_state(&*backend)?;
        Ok(MvccStore {
            backend,
            state: RwLock::new(state),
        })
    }

    /// Every record of the MVCC space (revisions, leases, members, meta) as
    /// a raft snapshot's data, and the body of a backup: length-delimited
    /// `SnapshotPair`s, the state at one applied index.
    pub fn dump(&self) -> Result<Vec<u8>> {
        // Applies hold the state's write lock until their batch is
        // written, so a reader in between sees one applied index.
        let _state = self.state.read();
        let mut out = Vec::new();
        for (key, value) in self.backend.scan(Space::Mvcc, &[], None)? {
            SnapshotPair { key, value }
                .encode_length_delimited(&mut out)
                .expect("encoding into a Vec cannot fail");
        }
        Ok(out)
    }

    /// Replaces the whole MVCC space with a snapshot's data, atomically.
    pub fn restore(&self, data: &[u8]) -> Result<()> {
        let mut state = self.state.write();
        let mut batch = WriteBatch::default();
        for (key, _) in self.backend.scan(Space::Mvcc, &[], None)? {
            batch.delete(key);
        }
        let mut buf = data;
        while !buf.is_empty() {
            let pair = SnapshotPair::decode_length_delimited(&mut buf)?;
            batch.put(pair.key, pair.value);
        }
        self.backend.write(Space::Mvcc, batch)?;
        *state = load_state(&*self.backend)?;
        Ok(())
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
        // Values are read without the lock: a revision record never changes,
        // and one can only disappear if a compaction passed `read_rev`.
        let mut kvs = Vec::with_capacity(revs.len());
        for rev in revs {
            match self.kv_at(rev)? {
                Some(kv) => kvs.push(kv),
                None if self.compact_revision() > read_rev => return Err(StoreError::Compacted),
                None => return Err(StoreError::Corrupt(format!("missing revision {rev:?}"))),
            }
        }
        Ok(RangeOutput {
            kvs,
            count,
            current_rev,
        })
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
            hasher.update(&key);
            hasher.update(&value);
        }
        Ok((hasher.finalize(), compact_rev, at))
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

    /// Starts the changes of one store revision. Only the apply loop writes.
    pub fn write(&self) -> WriteView<'_> {
        let state = self.state.write();
        let main = state.current_rev + 1;
        WriteView {
            state,
            backend: &*self.backend,
            main,
            sub: 0,
            batch: WriteBatch::default(),
            pending: HashMap::new(),
            events: Vec::new(),
        }
    }
}

/// Rebuilds the in-memory state from the backend's MVCC space.
fn load_state(backend: &dyn Backend) -> Result<State> {
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

fn check_read_revision(state: &State, at: i64) -> Result<i64> {
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

fn collect_revisions(
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

/// The outcome of a finished write view.
#[derive(Debug)]
pub struct Committed {
    /// The store revision after the write (unchanged if nothing changed).
    pub revision: i64,
    /// The events of this revision, in change order, with previous values.
    pub events: Vec<Event>,
}

/// The changes of one store revision, under the store's write lock. Reads
/// through the view see the changes made so far, as etcd's write txns do.
pub struct WriteView<'a> {
    state: RwLockWriteGuard<'a, State>,
    backend: &'a dyn Backend,
    main: i64,
    sub: i64,
    batch: WriteBatch,
    pending: HashMap<Revision, KeyValue>,
    events: Vec<Event>,
}

impl WriteView<'_> {
    /// The revision a read through this view reports.
    pub fn revision(&self) -> i64 {
        if self.changed() {
            self.main
        } else {
            self.state.current_rev
        }
    }

    pub fn compact_revision(&self) -> i64 {
        self.state.compact_rev
    }

    fn changed(&self) -> bool {
        self.sub > 0
    }

    pub fn live(&self, key: &[u8]) -> Option<LiveMeta> {
        self.state.index.live(key)
    }

    pub fn live_in(&self, range: &KeyRange) -> Vec<(Vec<u8>, LiveMeta)> {
        self.state.index.live_in(range)
    }

    fn kv_at(&self, rev: Revision) -> Result<Option<KeyValue>> {
        if let Some(kv) = self.pending.get(&rev) {
            return Ok(Some(kv.clone()));
        }
        match self.backend.get(Space::Mvcc, &rev.to_key())? {
            Some(bytes) => Ok(decode_revision(&bytes)?.kv),
            None => Ok(None),
        }
    }

    /// The current value of `key`, including this view's changes.
    pub fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let rev = self
            .state
            .index
            .history(key)
            .and_then(|h| h.visible_at(self.revision()));
        match rev {
            Some(rev) => self.kv_at(rev),
            None => Ok(None),
        }
    }

    /// Reads through the view; `at` ≤ 0 reads the view's own state.
    pub fn range(&self, range: &KeyRange, at: i64, limit: usize) -> Result<RangeOutput> {
        let read_rev = if at <= 0 || at == self.revision() {
            self.revision()
        } else {
            check_read_revision(&self.state, at)?
        };
        let (revs, count) = collect_revisions(&self.state.index, range, read_rev, limit);
        let mut kvs = Vec::with_capacity(revs.len());
        for rev in revs {
            let kv = self
                .kv_at(rev)?
                .ok_or_else(|| StoreError::Corrupt(format!("missing revision {rev:?}")))?;
            kvs.push(kv);
        }
        Ok(RangeOutput {
            kvs,
            count,
            current_rev: self.revision(),
        })
    }

    fn next_revision(&mut self) -> Revision {
        let rev = Revision::new(self.main, self.sub);
        self.sub += 1;
        rev
    }

    fn record(&mut self, rev: Revision, kv: &KeyValue, tombstone: bool) {
        let stored = StoredRevision {
            kv: Some(kv.clone()),
            tombstone,
        };
        self.batch
            .put(rev.to_key().to_vec(), stored.encode_to_vec());
    }

    /// Writes `key`, returning the new pair and the one it replaced.
    pub fn put(
        &mut self,
        key: &[u8],
        value: Vec<u8>,
        lease: i64,
    ) -> Result<(KeyValue, Option<KeyValue>)> {
        let prev = self.get(key)?;
        let rev = self.next_revision();
        let meta = self.state.index.record_put(key, rev, lease);
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision: meta.create_revision,
            mod_revision: meta.mod_revision,
            version: meta.version,
            value,
            lease,
        };
        self.record(rev, &kv, false);
        self.pending.insert(rev, kv.clone());
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv.clone()),
            prev_kv: prev.clone(),
        });
        Ok((kv, prev))
    }

    /// Deletes `key` if it is live, returning its last pair.
    pub fn delete(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
        let Some(prev) = self.get(key)? else {
            return Ok(None);
        };
        let rev = self.next_revision();
        self.state.index.record_delete(key, rev);
        let tombstone = KeyValue {
            key: key.to_vec(),
            mod_revision: rev.main,
            ..Default::default()
        };
        self.record(rev, &tombstone, true);
        self.events.push(Event {
            r#type: EventType::Delete as i32,
            kv: Some(tombstone),
            prev_kv: Some(prev.clone()),
        });
        Ok(Some(prev))
    }

    /// Discards history older than `at`. Does not create a revision.
    pub fn compact(&mut self, at: i64) -> Result<()> {
        if at <= self.state.compact_rev {
            return Err(StoreError::Compacted);
        }
        if at > self.state.current_rev {
            return Err(StoreError::FutureRevision);
        }
        for rev in self.state.index.compact(at) {
            self.batch.delete(rev.to_key().to_vec());
        }
        self.state.compact_rev = at;
        self.batch
            .put(META_COMPACT_REV.to_vec(), at.to_be_bytes().to_vec());
        Ok(())
    }

    /// Adds a record outside the revision history (leases) to this batch.
    pub fn put_record(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.batch.put(key, value);
    }

    pub fn delete_record(&mut self, key: Vec<u8>) {
        self.batch.delete(key);
    }

    /// Persists the changes together with `applied_index`, atomically.
    pub fn finish(mut self, applied_index: u64) -> Result<Committed> {
        if self.changed() {
            self.state.current_rev = self.main;
            self.batch
                .put(META_CURRENT_REV.to_vec(), self.main.to_be_bytes().to_vec());
        }
        self.batch.put(
            META_APPLIED_INDEX.to_vec(),
            (applied_index as i64).to_be_bytes().to_vec(),
        );
        let batch = std::mem::take(&mut self.batch);
        self.backend.write(Space::Mvcc, batch)?;
        Ok(Committed {
            revision: self.state.current_rev,
            events: std::mem::take(&mut self.events),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SledBackend;

    fn open(dir: &std::path::Path) -> MvccStore {
        MvccStore::open(Arc::new(SledBackend::open(dir).unwrap())).unwrap()
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
