//! The revisions of one key.
//!
//! Example: put at 2, put at 4, delete at 5, put at 7 gives entries
//! `2, 4, 5(tombstone), 7`. Reading at 4 sees revision 4, at 6 nothing, at 9
//! revision 7. Compacting at 5 drops 2 and 4 (superseded) and the tombstone at
//! 5 (nothing to keep alive), leaving `7`; compacting at 4 instead would keep 4,
//! the version visible at the compaction point.

use super::revision::Revision;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    rev: Revision,
    tombstone: bool,
}

/// What a live key looks like now; enough for compares and for the next put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveMeta {
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

#[derive(Debug, Clone, Default)]
pub struct KeyHistory {
    entries: Vec<Entry>,
    live: Option<LiveMeta>,
}

impl KeyHistory {
    pub fn record_put(&mut self, rev: Revision, lease: i64) -> LiveMeta {
        self.assert_newer(rev);
        let meta = match self.live {
            Some(prev) => LiveMeta {
                create_revision: prev.create_revision,
                mod_revision: rev.main,
                version: prev.version + 1,
                lease,
            },
            None => LiveMeta {
                create_revision: rev.main,
                mod_revision: rev.main,
                version: 1,
                lease,
            },
        };
        self.entries.push(Entry {
            rev,
            tombstone: false,
        });
        self.live = Some(meta);
        meta
    }

    /// Restores a put read back from the backend, where the metadata is known.
    pub fn restore_put(&mut self, rev: Revision, meta: LiveMeta) {
        self.assert_newer(rev);
        self.entries.push(Entry {
            rev,
            tombstone: false,
        });
        self.live = Some(meta);
    }

    pub fn record_delete(&mut self, rev: Revision) {
        self.assert_newer(rev);
        self.entries.push(Entry {
            rev,
            tombstone: true,
        });
        self.live = None;
    }

    fn assert_newer(&self, rev: Revision) {
        if let Some(last) = self.entries.last() {
            // Revisions only grow; anything else means the apply order broke.
            assert!(rev > last.rev, "revision {rev:?} not after {:?}", last.rev);
        }
    }

    pub fn live(&self) -> Option<LiveMeta> {
        self.live
    }

    /// The revision holding the key's value as of store revision `at`.
    pub fn visible_at(&self, at: i64) -> Option<Revision> {
        let idx = self.entries.partition_point(|e| e.rev.main <= at);
        let entry = self.entries[..idx].last()?;
        (!entry.tombstone).then_some(entry.rev)
    }

    /// The live revision just before `rev` (the "previous value" of a change).
    pub fn visible_before(&self, rev: Revision) -> Option<Revision> {
        let idx = self.entries.partition_point(|e| e.rev < rev);
        let entry = self.entries[..idx].last()?;
        (!entry.tombstone).then_some(entry.rev)
    }

    /// Whether `rev` is one of the revisions a compaction at `at` keeps
    /// (whether or not that compaction has run on this history yet): every
    /// one after `at`, and the one visible at `at` unless it is a deletion.
    pub fn keeps(&self, rev: Revision, at: i64) -> bool {
        let found = self.entries.binary_search_by(|e| e.rev.cmp(&rev));
        found.is_ok_and(|found| found >= self.first_kept(at))
    }

    /// Where the entries a compaction at `at` keeps begin.
    fn first_kept(&self, at: i64) -> usize {
        let visible_at = self.entries.partition_point(|e| e.rev.main <= at);
        match visible_at
            .checked_sub(1)
            .map(|last| self.entries[last].tombstone)
        {
            Some(false) => visible_at - 1,
            _ => visible_at,
        }
    }

    /// Drops revisions no read at or after `at` can see, pushing them to
    /// `removed`. Returns true when nothing is left.
    pub fn compact(&mut self, at: i64, removed: &mut Vec<Revision>) -> bool {
        let keep_from = self.first_kept(at);
        removed.extend(self.entries.drain(..keep_from).map(|e| e.rev));
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> KeyHistory {
        let mut h = KeyHistory::default();
        h.record_put(Revision::new(2, 0), 0);
        h.record_put(Revision::new(4, 0), 0);
        h.record_delete(Revision::new(5, 0));
        h.record_put(Revision::new(7, 0), 0);
        h
    }

    #[test]
    fn reads_at_revisions() {
        let h = history();
        assert_eq!(h.visible_at(1), None);
        assert_eq!(h.visible_at(3), Some(Revision::new(2, 0)));
        assert_eq!(h.visible_at(4), Some(Revision::new(4, 0)));
        assert_eq!(h.visible_at(6), None);
        assert_eq!(h.visible_at(100), Some(Revision::new(7, 0)));
        assert_eq!(h.live().unwrap().version, 1);
        assert_eq!(h.live().unwrap().create_revision, 7);
        assert_eq!(
            h.visible_before(Revision::new(4, 0)),
            Some(Revision::new(2, 0))
        );
        assert_eq!(h.visible_before(Revision::new(7, 0)), None);
    }

    #[test]
    fn versions_count_puts_within_a_generation() {
        let mut h = KeyHistory::default();
        h.record_put(Revision::new(2, 0), 0);
        let meta = h.record_put(Revision::new(3, 0), 9);
        assert_eq!(
            meta,
            LiveMeta {
                create_revision: 2,
                mod_revision: 3,
                version: 2,
                lease: 9
            }
        );
    }

    #[test]
    fn compaction_keeps_what_is_visible_at_the_compaction_point() {
        let mut h = history();
        let mut removed = vec![];
        assert!(!h.compact(4, &mut removed));
        assert_eq!(removed, vec![Revision::new(2, 0)]);
        assert_eq!(h.visible_at(4), Some(Revision::new(4, 0)));

        let mut removed = vec![];
        assert!(!h.compact(5, &mut removed));
        assert_eq!(removed, vec![Revision::new(4, 0), Revision::new(5, 0)]);
        assert_eq!(h.visible_at(100), Some(Revision::new(7, 0)));
    }

    #[test]
    fn keeps_names_what_a_compaction_would_keep() {
        let h = history();
        let kept = |at| {
            [2, 4, 5, 7]
                .into_iter()
                .filter(|main| h.keeps(Revision::new(*main, 0), at))
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(3), vec![2, 4, 5, 7]);
        assert_eq!(kept(4), vec![4, 5, 7]);
        assert_eq!(kept(5), vec![7]);
        assert!(
            !h.keeps(Revision::new(3, 0), 1),
            "never one of its revisions"
        );
        let mut compacted = history();
        compacted.compact(4, &mut Vec::new());
        assert!(compacted.keeps(Revision::new(4, 0), 4));
    }

    #[test]
    fn compacting_a_deleted_key_empties_it() {
        let mut h = KeyHistory::default();
        h.record_put(Revision::new(2, 0), 0);
        h.record_delete(Revision::new(3, 0));
        let mut removed = vec![];
        assert!(h.compact(3, &mut removed));
        assert_eq!(removed.len(), 2);
    }
}
