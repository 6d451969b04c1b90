//! Writes: a [`WriteView`] is the changes of one store revision; a
//! [`WriteGroup`] carries the views of many applied entries into one backend
//! batch, so a Ready's committed entries cost one backend write and the
//! meta records (current revision, applied index) are written once.

use std::collections::HashMap;

use capstan_proto::internal::StoredRevision;
use capstan_proto::mvccpb::{event::EventType, Event, KeyValue};
use parking_lot::RwLockWriteGuard;
use prost::Message;

use super::compactor::Compactor;
use super::key_history::LiveMeta;
use super::key_range::KeyRange;
use super::revision::Revision;
use super::state::{
    check_read_revision, collect_revisions, decode_revision, RangeOutput, State,
    META_APPLIED_INDEX, META_COMPACT_REV, META_CURRENT_REV,
};
use crate::error::{Result, StoreError};
use crate::storage::{Backend, Space, WriteBatch};

/// The outcome of a finished write view.
#[derive(Debug)]
pub struct Committed {
    /// The store revision after the write (unchanged if nothing changed).
    pub revision: i64,
    /// The events of this revision, in change order, with previous values.
    pub events: Vec<Event>,
}

/// Changes of several store revisions under the store's write lock, not
/// yet in the backend. Readers block on the lock until [`WriteGroup::commit`]
/// has written them, so the index never points at a record not yet written.
pub struct WriteGroup<'a> {
    state: RwLockWriteGuard<'a, State>,
    backend: &'a dyn Backend,
    compactor: &'a Compactor,
    batch: WriteBatch,
    /// Revisions compacted at in this group, left to the compactor.
    compactions: Vec<i64>,
    /// Records written in this group, for reads before the commit.
    pending: HashMap<Revision, KeyValue>,
    applied_index: Option<u64>,
    revised: bool,
    committed: Vec<Committed>,
}

impl<'a> WriteGroup<'a> {
    pub(super) fn new(
        state: RwLockWriteGuard<'a, State>,
        backend: &'a dyn Backend,
        compactor: &'a Compactor,
    ) -> Self {
        WriteGroup {
            state,
            backend,
            compactor,
            batch: WriteBatch::default(),
            compactions: Vec::new(),
            pending: HashMap::new(),
            applied_index: None,
            revised: false,
            committed: Vec::new(),
        }
    }

    /// Starts the changes of the next store revision.
    pub fn view(self) -> WriteView<'a> {
        let main = self.state.current_rev + 1;
        WriteView {
            group: self,
            main,
            sub: 0,
            events: Vec::new(),
        }
    }

    /// Entries ended in this group so far.
    pub fn is_empty(&self) -> bool {
        self.applied_index.is_none()
    }

    /// Writes every view's changes and the meta records in one atomic batch
    /// (not yet durable: see `Backend::flush`), releases the lock, and
    /// returns each view's outcome in order, for the watchers.
    pub fn commit(mut self) -> Result<Vec<Committed>> {
        if let Some(applied_index) = self.applied_index {
            if self.revised {
                let current = self.state.current_rev.to_be_bytes().to_vec();
                self.batch.put(META_CURRENT_REV.to_vec(), current);
            }
            let applied = (applied_index as i64).to_be_bytes().to_vec();
            self.batch.put(META_APPLIED_INDEX.to_vec(), applied);
            let batch = std::mem::take(&mut self.batch);
            self.backend.write(Space::Mvcc, batch)?;
            // After the batch: it may hold records a compaction in this
            // group removes.
            for at in self.compactions.drain(..) {
                self.compactor.schedule(at);
            }
        }
        Ok(std::mem::take(&mut self.committed))
    }
}

/// The changes of one store revision. Reads through the view see the
/// changes made so far (its own and earlier views' in the group), as etcd's
/// write txns do.
pub struct WriteView<'a> {
    group: WriteGroup<'a>,
    main: i64,
    sub: i64,
    events: Vec<Event>,
}

impl<'a> WriteView<'a> {
    /// The revision a read through this view reports.
    pub fn revision(&self) -> i64 {
        if self.changed() {
            self.main
        } else {
            self.group.state.current_rev
        }
    }

    pub fn compact_revision(&self) -> i64 {
        self.group.state.compact_rev
    }

    fn changed(&self) -> bool {
        self.sub > 0
    }

    pub fn live(&self, key: &[u8]) -> Option<LiveMeta> {
        self.group.state.index.live(key)
    }

    pub fn live_in(&self, range: &KeyRange) -> Vec<(Vec<u8>, LiveMeta)> {
        self.group.state.index.live_in(range)
    }

    fn kv_at(&self, rev: Revision) -> Result<Option<KeyValue>> {
        if let Some(kv) = self.group.pending.get(&rev) {
            return Ok(Some(kv.clone()));
        }
        match self.group.backend.get(Space::Mvcc, &rev.to_key())? {
            Some(bytes) => Ok(decode_revision(&bytes)?.kv),
            None => Ok(None),
        }
    }

    /// The current value of `key`, including this view's changes.
    pub fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let rev = self
            .group
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
            check_read_revision(&self.group.state, at)?
        };
        let (revs, count) = collect_revisions(&self.group.state.index, range, read_rev, limit);
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

    /// Adds the record of `kv` at `rev` to the batch and hands `kv` back:
    /// encoding it in place spares a copy of its key and value.
    fn record(&mut self, rev: Revision, kv: KeyValue, tombstone: bool) -> KeyValue {
        let stored = StoredRevision {
            kv: Some(kv),
            tombstone,
        };
        self.group
            .batch
            .put(rev.to_key().to_vec(), stored.encode_to_vec());
        stored.kv.expect("set above")
    }

    /// Writes `key`, returning the pair it replaced.
    pub fn put(&mut self, key: &[u8], value: Vec<u8>, lease: i64) -> Result<Option<KeyValue>> {
        let before = self.revision();
        let rev = self.next_revision();
        let (meta, replaced) = self.group.state.index.record_put(key, rev, lease, before);
        let prev = match replaced {
            Some(replaced) => self.kv_at(replaced)?,
            None => None,
        };
        let kv = KeyValue {
            key: key.to_vec(),
            create_revision: meta.create_revision,
            mod_revision: meta.mod_revision,
            version: meta.version,
            value,
            lease,
        };
        let kv = self.record(rev, kv, false);
        self.group.pending.insert(rev, kv.clone());
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev.clone(),
        });
        Ok(prev)
    }

    /// Deletes `key` if it is live, returning its last pair.
    pub fn delete(&mut self, key: &[u8]) -> Result<Option<KeyValue>> {
        let Some(prev) = self.get(key)? else {
            return Ok(None);
        };
        let rev = self.next_revision();
        self.group.state.index.record_delete(key, rev);
        let tombstone = KeyValue {
            key: key.to_vec(),
            mod_revision: rev.main,
            ..Default::default()
        };
        let tombstone = self.record(rev, tombstone, true);
        self.events.push(Event {
            r#type: EventType::Delete as i32,
            kv: Some(tombstone),
            prev_kv: Some(prev.clone()),
        });
        Ok(Some(prev))
    }

    /// Discards history older than `at`: reads below it fail from now on,
    /// and the compactor drops the old revisions from the index and the
    /// backend (see `compactor.rs`). Does not create a revision.
    pub fn compact(&mut self, at: i64) -> Result<()> {
        let state = &mut self.group.state;
        if at <= state.compact_rev {
            return Err(StoreError::Compacted);
        }
        if at > state.current_rev {
            return Err(StoreError::FutureRevision);
        }
        state.compact_rev = at;
        self.group.compactions.push(at);
        self.group
            .batch
            .put(META_COMPACT_REV.to_vec(), at.to_be_bytes().to_vec());
        Ok(())
    }

    /// Adds a record outside the revision history (leases) to this batch.
    pub fn put_record(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.group.batch.put(key, value);
    }

    pub fn delete_record(&mut self, key: Vec<u8>) {
        self.group.batch.delete(key);
    }

    /// Ends this revision as the effect of raft entry `applied_index` and
    /// hands the group on; nothing is written until the group commits.
    pub fn end(mut self, applied_index: u64) -> WriteGroup<'a> {
        if self.changed() {
            self.group.state.current_rev = self.main;
            self.group.revised = true;
        }
        self.group.applied_index = Some(applied_index);
        let committed = Committed {
            revision: self.group.state.current_rev,
            events: std::mem::take(&mut self.events),
        };
        self.group.committed.push(committed);
        self.group
    }

    /// Persists the changes together with `applied_index`, atomically, as a
    /// group of one.
    pub fn finish(self, applied_index: u64) -> Result<Committed> {
        let mut committed = self.end(applied_index).commit()?;
        Ok(committed.pop().expect("a group of one view commits one"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::mvcc::MvccStore;
    use crate::storage::SledBackend;

    #[test]
    fn a_group_writes_many_revisions_in_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(SledBackend::open(dir.path()).unwrap());
        let store = MvccStore::open(backend.clone()).unwrap();
        let mut view = store.write_group().view();
        view.put(b"a", b"1".to_vec(), 0).unwrap();
        let group = view.end(7);
        let mut view = group.view();
        // An earlier view's change is visible before anything is written.
        assert_eq!(view.get(b"a").unwrap().unwrap().value, b"1");
        view.put(b"a", b"2".to_vec(), 0).unwrap();
        let group = view.end(8);
        // An entry without changes still advances the applied index.
        let group = group.view().end(9);
        let written = backend.scan(Space::Mvcc, b"r", Some(b"s")).unwrap();
        assert!(written.is_empty(), "nothing is written before the commit");
        let committed = group.commit().unwrap();
        let revisions: Vec<_> = committed.iter().map(|c| c.revision).collect();
        assert_eq!(revisions, vec![2, 3, 3]);
        assert_eq!(committed[1].events[0].prev_kv.as_ref().unwrap().value, b"1");
        assert!(committed[2].events.is_empty());
        assert_eq!(store.applied_index().unwrap(), 9);
        assert_eq!(store.current_revision(), 3);
        let at_two = store.range(&KeyRange::new(b"a", b""), 2, 0).unwrap();
        assert_eq!(at_two.kvs[0].value, b"1");
        drop(store);
        let reopened = MvccStore::open(backend).unwrap();
        assert_eq!(reopened.current_revision(), 3);
    }
}
