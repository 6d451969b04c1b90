//! Replacing the whole MVCC space: a restore from a dump in memory, and a
//! snapshot install that streams a file larger than memory.

use std::mem;

use capstan_proto::internal::SnapshotPair;
use prost::Message;

use super::revision::REVISION_PREFIX;
use super::state::StateBuilder;
use super::store::MvccStore;
use crate::error::{Result, StoreError};
use crate::storage::{for_each_pair, Pair, Space, WriteBatch, LARGE_BATCH};

/// What [`MvccStore::replace_with`] hands its filler: puts a pair, or
/// deletes a key if the value is None.
pub type Fill<'a, E> = dyn FnMut(Vec<u8>, Option<Vec<u8>>) -> std::result::Result<(), E> + 'a;

impl MvccStore {
    /// Replaces the whole MVCC space with a dump's data, atomically.
    pub fn restore(&self, data: &[u8]) -> Result<()> {
        let _removing = self.removals.write();
        let mut state = self.state.write();
        let mut batch = self.deleting_everything()?;
        let mut builder = StateBuilder::default();
        let mut buf = data;
        while !buf.is_empty() {
            let pair = SnapshotPair::decode_length_delimited(&mut buf)?;
            builder.add(&pair.key, &pair.value)?;
            batch.put(pair.key, pair.value);
        }
        self.backend.write(Space::Mvcc, batch)?;
        *state = builder.finish();
        self.resume_compaction(&state);
        Ok(())
    }

    /// Replaces the whole MVCC space with the pairs `fill` puts (a None
    /// value deletes a record that is not a revision), revisions in
    /// revision order. The old records are deleted in one atomic batch
    /// with the first pair: a caller that must notice a crash halfway puts
    /// a marker first and deletes it last. The rest is loaded as it comes
    /// (see [`crate::storage::Backend::load`]), so memory stays flat, and
    /// the index is built from the pairs on their way in.
    pub fn replace_with<E: From<StoreError>>(
        &self,
        fill: impl FnOnce(&mut Fill<'_, E>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let _removing = self.removals.write();
        let mut state = self.state.write();
        let mut first = Some(self.deleting_everything()?);
        let mut builder = StateBuilder::default();
        let mut loading: Vec<Pair> = Vec::new();
        fill(&mut |key, value| {
            match &value {
                Some(value) => builder.add(&key, value)?,
                None if key.first() == Some(&REVISION_PREFIX) => {
                    return Err(StoreError::Corrupt(format!(
                        "a replacement deletes revision record {key:?}"
                    ))
                    .into())
                }
                None => {}
            }
            if let Some(mut batch) = first.take() {
                batch.ops.push((key, value));
                return Ok(self.backend.write(Space::Mvcc, batch)?);
            }
            match value {
                Some(value) => {
                    loading.push((key, value));
                    if loading.len() >= LARGE_BATCH {
                        self.backend.load(Space::Mvcc, mem::take(&mut loading))?;
                    }
                }
                None => {
                    // After everything put before it, as the caller's
                    // marker must be.
                    self.backend.load(Space::Mvcc, mem::take(&mut loading))?;
                    let mut batch = WriteBatch::default();
                    batch.delete(key);
                    self.backend.write(Space::Mvcc, batch)?;
                }
            }
            Ok(())
        })?;
        if let Some(batch) = first {
            self.backend.write(Space::Mvcc, batch)?;
        }
        self.backend.load(Space::Mvcc, loading)?;
        *state = builder.finish();
        self.resume_compaction(&state);
        Ok(())
    }

    /// A batch deleting every record of the MVCC space, read a page at a
    /// time so that only the keys are held (a member installing over a
    /// large state it fell behind with).
    fn deleting_everything(&self) -> Result<WriteBatch> {
        let mut batch = WriteBatch::default();
        for_each_pair(
            &*self.backend,
            Space::Mvcc,
            &[],
            None,
            LARGE_BATCH,
            |key, _| {
                batch.delete(key);
                Ok(())
            },
        )?;
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use capstan_proto::internal::SnapshotPair;
    use prost::Message;

    use super::*;
    use crate::mvcc::{KeyRange, Revision};
    use crate::storage::SledBackend;

    fn open(dir: &std::path::Path) -> MvccStore {
        MvccStore::open(Arc::new(SledBackend::reopen(dir))).unwrap()
    }

    /// A key, its value, create revision and version.
    type Seen = (Vec<u8>, Vec<u8>, i64, i64);

    /// What a read at `at` sees, and the revision counters.
    fn seen(store: &MvccStore, at: i64) -> (Vec<Seen>, i64, i64) {
        let all = KeyRange::new(b"\0", b"\0");
        let kvs = store.range(&all, at, 0).unwrap().kvs;
        let kvs = kvs
            .into_iter()
            .map(|kv| (kv.key, kv.value, kv.create_revision, kv.version))
            .collect();
        (kvs, store.current_revision(), store.compact_revision())
    }

    /// A store with overwrites, deletions and a compaction behind it.
    fn with_history(dir: &std::path::Path) -> MvccStore {
        let store = open(dir);
        for round in 0..3u8 {
            let mut view = store.write();
            for key in 0..50 {
                view.put(format!("k{key:02}").as_bytes(), vec![round; 8], 0)
                    .unwrap();
            }
            view.finish(u64::from(round) + 1).unwrap();
        }
        let mut view = store.write();
        view.delete(b"k07").unwrap();
        view.compact(3).unwrap();
        view.finish(4).unwrap();
        store.settle_compaction();
        store
    }

    fn pairs(dump: &[u8]) -> Vec<SnapshotPair> {
        let mut buf = dump;
        let mut out = Vec::new();
        while !buf.is_empty() {
            out.push(SnapshotPair::decode_length_delimited(&mut buf).unwrap());
        }
        out
    }

    #[test]
    fn a_replacement_builds_the_state_a_restart_would_load() {
        let dir = tempfile::tempdir().unwrap();
        let source = with_history(&dir.path().join("source"));
        let dump = source.dump().unwrap();
        let target = open(&dir.path().join("target"));
        let mut view = target.write();
        view.put(b"old", b"gone".to_vec(), 0).unwrap();
        view.finish(9).unwrap();
        target
            .replace_with::<StoreError>(|put| {
                put(b"m/marker".to_vec(), Some(b"x".to_vec()))?;
                for pair in pairs(&dump) {
                    put(pair.key, Some(pair.value))?;
                }
                put(b"m/marker".to_vec(), None)
            })
            .unwrap();
        for at in [0, 3, 4] {
            assert_eq!(seen(&target, at), seen(&source, at), "at {at}");
        }
        drop(target);
        let restarted = open(&dir.path().join("target"));
        for at in [0, 3, 4] {
            assert_eq!(seen(&restarted, at), seen(&source, at), "at {at}");
        }
    }

    #[test]
    fn revisions_out_of_order_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = open(dir.path());
        let record = |main| {
            let stored = capstan_proto::internal::StoredRevision {
                kv: Some(Default::default()),
                tombstone: false,
            };
            (
                Revision::new(main, 0).to_key().to_vec(),
                stored.encode_to_vec(),
            )
        };
        let refused = target.replace_with::<StoreError>(|put| {
            for (key, value) in [record(3), record(2)] {
                put(key, Some(value))?;
            }
            Ok(())
        });
        assert!(
            matches!(refused, Err(StoreError::Corrupt(_))),
            "{refused:?}"
        );
    }
}
