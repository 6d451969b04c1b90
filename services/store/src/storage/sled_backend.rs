//! [`Backend`] on sled 0.34: one sled tree per [`Space`], one database file.

use std::path::Path;

use super::{Backend, Pair, Space, WriteBatch};
use crate::error::Result;

pub struct SledBackend {
    db: sled::Db,
    raft: sled::Tree,
    mvcc: sled::Tree,
}

impl SledBackend {
    pub fn open(dir: &Path) -> Result<Self> {
        // The background flusher is turned off: durability comes only from the
        // explicit flush the raft loop makes once per Ready, before it answers.
        let db = sled::Config::new()
            .path(dir)
            .flush_every_ms(None)
            .cache_capacity(256 * 1024 * 1024)
            .open()?;
        let raft = db.open_tree("raft")?;
        let mvcc = db.open_tree("mvcc")?;
        Ok(SledBackend { db, raft, mvcc })
    }

    fn tree(&self, space: Space) -> &sled::Tree {
        match space {
            Space::Raft => &self.raft,
            Space::Mvcc => &self.mvcc,
        }
    }

    fn range(&self, space: Space, start: &[u8], end: Option<&[u8]>) -> sled::Iter {
        let tree = self.tree(space);
        match end {
            Some(end) => tree.range(start.to_vec()..end.to_vec()),
            None => tree.range(start.to_vec()..),
        }
    }
}

impl Backend for SledBackend {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tree(space).get(key)?.map(|v| v.to_vec()))
    }

    fn scan(&self, space: Space, start: &[u8], end: Option<&[u8]>) -> Result<Vec<Pair>> {
        self.scan_limit(space, start, end, usize::MAX)
    }

    fn scan_limit(
        &self,
        space: Space,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Pair>> {
        if matches!(end, Some(end) if end <= start) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for item in self.range(space, start, end).take(limit) {
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn last_in(&self, space: Space, start: &[u8], end: &[u8]) -> Result<Option<Pair>> {
        if end <= start {
            return Ok(None);
        }
        match self.range(space, start, Some(end)).next_back() {
            Some(item) => {
                let (k, v) = item?;
                Ok(Some((k.to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }

    fn write(&self, space: Space, batch: WriteBatch) -> Result<()> {
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.ops {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.tree(space).apply_batch(sled_batch)?;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_is_visible_and_survives_reopen_after_flush() {
        let dir = tempfile::tempdir().unwrap();
        {
            let backend = SledBackend::open(dir.path()).unwrap();
            let mut batch = WriteBatch::default();
            batch.put(b"a".to_vec(), b"1".to_vec());
            batch.put(b"b".to_vec(), b"2".to_vec());
            backend.write(Space::Mvcc, batch).unwrap();
            backend.flush().unwrap();
        }
        let backend = SledBackend::open(dir.path()).unwrap();
        let pairs = backend.scan(Space::Mvcc, b"a", None).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(backend.get(Space::Raft, b"a").unwrap(), None);
        let last = backend.last_in(Space::Mvcc, b"a", b"z").unwrap().unwrap();
        assert_eq!(last.0, b"b".to_vec());
    }
}
