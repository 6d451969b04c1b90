//! Dumping the whole MVCC space (a raft snapshot for a lagging member, the
//! body of `etcdctl snapshot save`) while the store goes on applying.
//!
//! A dump of a large store takes seconds. Done under the state's read lock,
//! it held off every apply for that long, and on a leader cutting a
//! snapshot it also held off the Ready loop, heartbeats included. The lock
//! is not needed for most of it: a revision record never changes once
//! written, and only the compactor and a restore remove any. So a dump
//! holds removals off (`MvccStore::removals`), and under the lock only
//! notes the current revision and copies the few other records (meta,
//! leases, members, alarms), all at one applied index. The revision records
//! up to that revision are then read from the backend without the lock, a
//! page at a time; records applied since lie beyond the end of the range.

use capstan_proto::internal::SnapshotPair;
use prost::Message;

use super::revision::{Revision, REVISION_PREFIX};
use super::state::{decode_i64, META_APPLIED_INDEX};
use super::store::MvccStore;
use crate::error::{Result, StoreError};
use crate::storage::{Pair, Space};

/// About how many bytes a dump reads from the backend at a time: the
/// number of records per page follows their size (a record can be as
/// big as a request, 1.5 MiB by default), starting from a few.
const DUMP_PAGE_BYTES: usize = 4 << 20;
const DUMP_PAGE_RECORDS: std::ops::RangeInclusive<usize> = 8..=1024;

/// What a dump wrote, and the applied index its state is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dumped {
    pub bytes: u64,
    pub applied_index: u64,
}

impl MvccStore {
    /// Every record of the MVCC space (revisions, leases, members, meta) as
    /// a raft snapshot's data, and the body of a backup: length-delimited
    /// `SnapshotPair`s, the state at one applied index.
    pub fn dump(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.dump_to(&mut out)?;
        Ok(out)
    }

    /// Writes what [`MvccStore::dump`] returns to `out`, reading the
    /// backend a page at a time so that memory does not grow with the
    /// store.
    pub fn dump_to(&self, out: &mut impl std::io::Write) -> Result<Dumped> {
        let mut bytes = 0;
        let applied_index = self.for_each_record(|key, value| -> Result<()> {
            let pair = SnapshotPair {
                key: key.to_vec(),
                value: value.to_vec(),
            };
            let encoded = pair.encode_length_delimited_to_vec();
            out.write_all(&encoded)
                .map_err(|err| StoreError::Storage(format!("writing a dump: {err}")))?;
            bytes += encoded.len() as u64;
            Ok(())
        })?;
        Ok(Dumped {
            bytes,
            applied_index,
        })
    }

    /// Calls `f` with every record of the MVCC space in key order, all at
    /// one applied index, which it returns. Applies go on meanwhile.
    pub fn for_each_record<E: From<StoreError>>(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let _no_removals = self.removals.read();
        let (others, revisions_end) = {
            // Applies hold the state's write lock until their batch is
            // written, so what is read here is at one applied index.
            let state = self.state.read();
            let mut others = self
                .backend
                .scan(Space::Mvcc, &[], Some(&[REVISION_PREFIX]))?;
            others.extend(
                self.backend
                    .scan(Space::Mvcc, &[REVISION_PREFIX + 1], None)?,
            );
            let end = Revision::first_key_of(state.current_rev + 1);
            (others, end)
        };
        let applied_index = applied_index_in(&others)?;
        let (before, after) =
            others.split_at(others.partition_point(|(key, _)| {
                key.first().is_some_and(|first| *first < REVISION_PREFIX)
            }));
        for (key, value) in before {
            f(key, value)?;
        }
        self.for_each_revision(&revisions_end, &mut f)?;
        for (key, value) in after {
            f(key, value)?;
        }
        Ok(applied_index)
    }

    /// Calls `f` with every revision record before `end`, a page at a time.
    fn for_each_revision<E: From<StoreError>>(
        &self,
        end: &[u8],
        f: &mut impl FnMut(&[u8], &[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut start = vec![REVISION_PREFIX];
        let mut page_records = *DUMP_PAGE_RECORDS.start();
        loop {
            let page = self
                .backend
                .scan_limit(Space::Mvcc, &start, Some(end), page_records)?;
            let full = page.len() == page_records;
            let mut page_bytes = 0;
            for (key, value) in page {
                f(&key, &value)?;
                page_bytes += key.len() + value.len();
                start = key;
                start.push(0); // the next page starts right after this key
            }
            if !full {
                return Ok(());
            }
            let record = (page_bytes / page_records).max(1);
            page_records = (DUMP_PAGE_BYTES / record)
                .clamp(*DUMP_PAGE_RECORDS.start(), *DUMP_PAGE_RECORDS.end());
        }
    }
}

fn applied_index_in(records: &[Pair]) -> Result<u64> {
    let Ok(at) = records.binary_search_by(|(key, _)| key.as_slice().cmp(META_APPLIED_INDEX)) else {
        return Ok(0);
    };
    Ok(decode_i64(META_APPLIED_INDEX, &records[at].1)? as u64)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::storage::{SledBackend, WriteBehind};

    fn open(dir: &std::path::Path) -> MvccStore {
        let backend = WriteBehind::new(SledBackend::reopen(dir)).unwrap();
        MvccStore::open(Arc::new(backend)).unwrap()
    }

    /// Every record's key, from the dump's data.
    fn keys(mut data: &[u8]) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        while !data.is_empty() {
            keys.push(
                SnapshotPair::decode_length_delimited(&mut data)
                    .unwrap()
                    .key,
            );
        }
        keys
    }

    fn put_all(store: &MvccStore, round: u8, applied_index: u64) {
        let mut view = store.write();
        for i in 0..200 {
            view.put(format!("k{i:03}").as_bytes(), vec![round; 20], 0)
                .unwrap();
        }
        view.finish(applied_index).unwrap();
    }

    #[test]
    fn a_dump_lets_writes_and_compactions_go_on_and_stays_at_one_applied_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        put_all(&store, 1, 10);
        put_all(&store, 2, 11);
        let before = store.dump().unwrap();

        let mut written = Vec::new();
        let mut seen = 0;
        let dumped = store
            .for_each_record(|key, value| -> Result<()> {
                seen += 1;
                if seen == 1 {
                    // Held under the old lock, this write waited forever.
                    put_all(&store, 3, 12);
                    let at = store.current_revision();
                    let mut view = store.write();
                    view.compact(at).unwrap();
                    view.finish(13).unwrap();
                    // The compactor now wants to delete rounds 1 and 2.
                    std::thread::sleep(Duration::from_millis(200));
                }
                let pair = SnapshotPair {
                    key: key.to_vec(),
                    value: value.to_vec(),
                };
                written.extend(pair.encode_length_delimited_to_vec());
                Ok(())
            })
            .unwrap();

        assert_eq!(dumped, 11);
        assert!(
            written == before,
            "the dump is the state at applied index 11: {} records, {} expected",
            keys(&written).len(),
            keys(&before).len()
        );
        store.settle_compaction();
        let after = store.dump().unwrap();
        let revisions = |data: &[u8]| {
            keys(data)
                .into_iter()
                .filter(|key| key[0] == REVISION_PREFIX)
                .count()
        };
        assert_eq!(revisions(&before), 400);
        assert_eq!(revisions(&after), 200, "the compaction went on afterwards");
    }
}
