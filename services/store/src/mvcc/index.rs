//! The in-memory index from key to its history of revisions.
//!
//! Values are not here: only which revision of each key is visible when. The
//! index is rebuilt from the backend's revision records at start-up.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::key_history::{KeyHistory, LiveMeta};
use super::key_range::KeyRange;
use super::revision::Revision;

#[derive(Debug, Default)]
pub struct KeyIndex {
    keys: BTreeMap<Vec<u8>, KeyHistory>,
}

impl KeyIndex {
    pub fn history(&self, key: &[u8]) -> Option<&KeyHistory> {
        self.keys.get(key)
    }

    pub fn live(&self, key: &[u8]) -> Option<LiveMeta> {
        self.keys.get(key).and_then(KeyHistory::live)
    }

    /// Records a put of `key` at `rev` and returns the key's new metadata
    /// with the revision that held its value as of store revision `before`.
    /// One lookup for both: on a large index a put's cost is mostly the
    /// key comparisons of finding its history.
    pub fn record_put(
        &mut self,
        key: &[u8],
        rev: Revision,
        lease: i64,
        before: i64,
    ) -> (LiveMeta, Option<Revision>) {
        let history = self.entry(key);
        let replaced = history.visible_at(before);
        (history.record_put(rev, lease), replaced)
    }

    pub fn restore_put(&mut self, key: &[u8], rev: Revision, meta: LiveMeta) {
        self.entry(key).restore_put(rev, meta)
    }

    pub fn record_delete(&mut self, key: &[u8], rev: Revision) {
        self.entry(key).record_delete(rev)
    }

    /// The history of `key`, made empty if the key is new. One lookup; the
    /// owned key it allocates is kept only for a new key.
    fn entry(&mut self, key: &[u8]) -> &mut KeyHistory {
        self.keys.entry(key.to_vec()).or_default()
    }

    /// Calls `visit` with each key in `range` and its revision visible at
    /// `at`, in key order, until `visit` returns false.
    pub fn visit_at(
        &self,
        range: &KeyRange,
        at: i64,
        mut visit: impl FnMut(&[u8], Revision) -> bool,
    ) {
        for (key, history) in self.histories_in(range) {
            if let Some(rev) = history.visible_at(at) {
                if !visit(key, rev) {
                    return;
                }
            }
        }
    }

    /// Keys in `range` that are live now, with their metadata.
    pub fn live_in(&self, range: &KeyRange) -> Vec<(Vec<u8>, LiveMeta)> {
        self.histories_in(range)
            .filter_map(|(k, h)| h.live().map(|meta| (k.to_vec(), meta)))
            .collect()
    }

    fn histories_in<'a>(
        &'a self,
        range: &KeyRange,
    ) -> Box<dyn Iterator<Item = (&'a [u8], &'a KeyHistory)> + 'a> {
        let iter: Box<dyn Iterator<Item = (&Vec<u8>, &KeyHistory)>> = match range {
            KeyRange::Single(key) => Box::new(self.keys.get_key_value(key).into_iter()),
            KeyRange::From(start) => Box::new(self.keys.range(start.clone()..)),
            KeyRange::Between(start, end) if start < end => Box::new(
                self.keys
                    .range::<Vec<u8>, _>((Bound::Included(start), Bound::Excluded(end))),
            ),
            KeyRange::Between(..) => Box::new(std::iter::empty()),
        };
        Box::new(iter.map(|(k, h)| (k.as_slice(), h)))
    }

    /// Forgets every revision no read at or after `at` can see and returns
    /// them, so their values can be removed from the backend.
    #[cfg(test)]
    pub fn compact(&mut self, at: i64) -> Vec<Revision> {
        self.compact_slice(at, &[], usize::MAX).0
    }

    /// Compacts at `at` the histories of at most `keys` keys from `from`
    /// on: the revisions it dropped, and the key to go on from (None once
    /// the last key is done). Reads at or after `at` see the same before
    /// and after, so a compaction in slices can let writes in between.
    pub fn compact_slice(
        &mut self,
        at: i64,
        from: &[u8],
        keys: usize,
    ) -> (Vec<Revision>, Option<Vec<u8>>) {
        let mut removed = Vec::new();
        let mut emptied = Vec::new();
        let mut next = None;
        let slice = self
            .keys
            .range_mut::<[u8], _>((Bound::Included(from), Bound::Unbounded));
        for (done, (key, history)) in slice.enumerate() {
            if done == keys {
                next = Some(key.clone());
                break;
            }
            if history.compact(at, &mut removed) {
                emptied.push(key.clone());
            }
        }
        for key in emptied {
            self.keys.remove(&key);
        }
        (removed, next)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_at(index: &KeyIndex, range: &KeyRange, at: i64) -> Vec<Vec<u8>> {
        let mut out = vec![];
        index.visit_at(range, at, |k, _| {
            out.push(k.to_vec());
            true
        });
        out
    }

    #[test]
    fn ranges_see_the_keys_alive_at_a_revision() {
        let mut index = KeyIndex::default();
        index.record_put(b"a", Revision::new(2, 0), 0, i64::MAX);
        index.record_put(b"b", Revision::new(3, 0), 0, i64::MAX);
        index.record_put(b"c", Revision::new(4, 0), 0, i64::MAX);
        index.record_delete(b"b", Revision::new(5, 0));
        let all = KeyRange::new(b"\0", b"\0");
        assert_eq!(
            keys_at(&index, &all, 4),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(keys_at(&index, &all, 5), vec![b"a".to_vec(), b"c".to_vec()]);
        assert_eq!(
            keys_at(&index, &KeyRange::new(b"b", b"c"), 3),
            vec![b"b".to_vec()]
        );
        assert!(keys_at(&index, &KeyRange::new(b"c", b"a"), 5).is_empty());
        assert_eq!(index.live_in(&all).len(), 2);
    }

    #[test]
    fn a_compaction_in_slices_drops_what_one_whole_compaction_drops() {
        let fill = || {
            let mut index = KeyIndex::default();
            for i in 0..100i64 {
                let key = format!("k{i:03}");
                index.record_put(key.as_bytes(), Revision::new(2 + i, 0), 0, i64::MAX);
                index.record_put(key.as_bytes(), Revision::new(200 + i, 0), 0, i64::MAX);
                if i % 3 == 0 {
                    index.record_delete(key.as_bytes(), Revision::new(400 + i, 0));
                }
            }
            index
        };
        let mut whole = fill();
        let expected = whole.compact(450);
        let mut sliced = fill();
        let mut removed = Vec::new();
        let mut from = Vec::new();
        loop {
            let (dropped, next) = sliced.compact_slice(450, &from, 7);
            removed.extend(dropped);
            match next {
                Some(next) => from = next,
                None => break,
            }
        }
        assert_eq!(removed, expected);
        assert_eq!(sliced.len(), whole.len());
        let all = KeyRange::new(b"\0", b"\0");
        assert_eq!(keys_at(&sliced, &all, 500), keys_at(&whole, &all, 500));
    }

    #[test]
    fn compaction_drops_dead_keys() {
        let mut index = KeyIndex::default();
        index.record_put(b"a", Revision::new(2, 0), 0, i64::MAX);
        index.record_delete(b"a", Revision::new(3, 0));
        index.record_put(b"b", Revision::new(4, 0), 0, i64::MAX);
        let removed = index.compact(4);
        assert_eq!(removed, vec![Revision::new(2, 0), Revision::new(3, 0)]);
        assert_eq!(index.len(), 1);
    }
}
