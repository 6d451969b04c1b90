//! [`Backend`] on sled 0.34: one sled tree per [`Space`], one database.
//!
//! sled does not give freed space back to the file system, so
//! [`Backend::defragment`] copies the live pairs into a new database
//! beside the old one and switches to it: the name of the live database
//! is recorded in `<path>.live` (written and renamed atomically), so a
//! crash at any moment leaves either the old or the new one live, and the
//! other is removed at the next open.

use std::path::{Path, PathBuf};

use parking_lot::{RwLock, RwLockReadGuard};

use super::backend::{Backend, Change, Pair, Space, WriteBatch};
use crate::error::{Result, StoreError};

/// Pairs copied per batch while defragmenting.
const COPY_BATCH: usize = 10_000;

/// sled's page cache. The store's reads are mostly of recent revisions
/// (the API server answers lists and watches from its own caches), and a
/// cache of 64 MiB rather than 256 left 10,000 Running pods' control plane
/// 35 MB smaller with 8 MiB no smaller still: what sled keeps beyond its
/// cache is its own bookkeeping.
const CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// One open sled database.
struct Trees {
    dir: PathBuf,
    db: sled::Db,
    raft: sled::Tree,
    mvcc: sled::Tree,
}

impl Trees {
    fn open(dir: &Path) -> Result<Trees> {
        // The background flusher is turned off: durability comes only from the
        // explicit flush the raft loop makes once per Ready, before it answers.
        let db = sled::Config::new()
            .path(dir)
            .flush_every_ms(None)
            .cache_capacity(CACHE_BYTES)
            .open()?;
        let raft = db.open_tree("raft")?;
        let mvcc = db.open_tree("mvcc")?;
        Ok(Trees {
            dir: dir.to_path_buf(),
            db,
            raft,
            mvcc,
        })
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

    /// Copies every pair of both trees into `to`, in bounded batches.
    fn copy_into(&self, to: &Trees) -> Result<()> {
        for space in [Space::Raft, Space::Mvcc] {
            let mut batch = sled::Batch::default();
            let mut pending = 0;
            for item in self.tree(space).iter() {
                let (key, value) = item?;
                batch.insert(key, value);
                pending += 1;
                if pending == COPY_BATCH {
                    to.tree(space).apply_batch(std::mem::take(&mut batch))?;
                    pending = 0;
                }
            }
            to.tree(space).apply_batch(batch)?;
        }
        to.db.flush()?;
        Ok(())
    }
}

pub struct SledBackend {
    /// The path the backend was opened with; live databases are `path`
    /// itself or `path.N`.
    path: PathBuf,
    /// Readers and writers share it; a defragmentation holds it alone.
    live: RwLock<Trees>,
}

impl SledBackend {
    pub fn open(path: &Path) -> Result<Self> {
        let dir = live_dir(path)?;
        remove_stale(path, &dir);
        Ok(SledBackend {
            path: path.to_path_buf(),
            live: RwLock::new(Trees::open(&dir)?),
        })
    }

    fn trees(&self) -> RwLockReadGuard<'_, Trees> {
        self.live.read()
    }
}

fn io_error(what: &str, path: &Path, err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("{what} {}: {err}", path.display()))
}

/// The file naming the live database.
fn pointer_path(path: &Path) -> PathBuf {
    path.with_extension("live")
}

/// The live database: the one the pointer names, else `path` itself.
fn live_dir(path: &Path) -> Result<PathBuf> {
    let pointer = pointer_path(path);
    match std::fs::read_to_string(&pointer) {
        Ok(name) => Ok(path.with_file_name(name.trim())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(path.to_path_buf()),
        Err(err) => Err(io_error("read", &pointer, err)),
    }
}

/// The generation of a database directory: 0 for `path`, N for `path.N`.
fn generation(path: &Path, dir: &Path) -> Option<u64> {
    if dir == path {
        return Some(0);
    }
    let base = path.file_name()?.to_str()?;
    let name = dir.file_name()?.to_str()?;
    name.strip_prefix(base)?.strip_prefix('.')?.parse().ok()
}

/// Removes the databases a defragmentation left behind: every
/// generation of `path` but the live one.
fn remove_stale(path: &Path, live: &Path) {
    let Some(parent) = path.parent() else { return };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir != live && dir.is_dir() && generation(path, &dir).is_some() {
            tracing::info!(dir = %dir.display(), "removing a database left by a defragmentation");
            if let Err(err) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), %err, "cannot remove an old database");
            }
        }
    }
}

/// Names `dir` as the live database, durably.
fn switch_pointer(path: &Path, dir: &Path) -> Result<()> {
    let pointer = pointer_path(path);
    let temporary = pointer.with_extension("live.tmp");
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        std::io::Write::write_all(&mut file, name.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &pointer)?;
        if let Some(parent) = pointer.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|err| io_error("write", &pointer, err))
}

impl Backend for SledBackend {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.trees().tree(space).get(key)?.map(|v| v.to_vec()))
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
        let trees = self.trees();
        let mut out = Vec::new();
        for item in trees.range(space, start, end).take(limit) {
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn last_in(&self, space: Space, start: &[u8], end: &[u8]) -> Result<Option<Pair>> {
        if end <= start {
            return Ok(None);
        }
        match self.trees().range(space, start, Some(end)).next_back() {
            Some(item) => {
                let (k, v) = item?;
                Ok(Some((k.to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }

    fn write(&self, space: Space, batch: WriteBatch) -> Result<()> {
        // sled copies a value into a buffer of its own whether it is given
        // a vector or a slice.
        let mut changes = batch.ops.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
        self.write_from(space, &mut changes)
    }

    fn write_from(
        &self,
        space: Space,
        changes: &mut dyn Iterator<Item = Change<'_>>,
    ) -> Result<()> {
        let mut sled_batch = sled::Batch::default();
        for (key, value) in changes {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.trees().tree(space).apply_batch(sled_batch)?;
        Ok(())
    }

    fn load(&self, space: Space, pairs: Vec<Pair>) -> Result<()> {
        // sled applies a batch in hash order; single inserts in key order
        // fill its leaves in order (a million pairs: 10.1 s as batches of
        // 16,384, 7.2 s one by one).
        let trees = self.trees();
        let tree = trees.tree(space);
        for (key, value) in pairs {
            tree.insert(key, value)?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.trees().db.flush()?;
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        self.trees().db.size_on_disk().unwrap_or(0)
    }

    fn defragment(&self) -> Result<()> {
        let mut live = self.live.write();
        live.db.flush()?;
        let next_generation = generation(&self.path, &live.dir).unwrap_or(0) + 1;
        let next = self.path.with_extension(next_generation.to_string());
        if next.exists() {
            std::fs::remove_dir_all(&next).map_err(|err| io_error("remove", &next, err))?;
        }
        let fresh = Trees::open(&next)?;
        live.copy_into(&fresh)?;
        switch_pointer(&self.path, &next)?;
        let old = std::mem::replace(&mut *live, fresh);
        let old_dir = old.dir.clone();
        drop(old);
        // Nothing refers to the old database any more; if removing it
        // fails now, the next open removes it.
        if let Err(err) = std::fs::remove_dir_all(&old_dir) {
            tracing::warn!(dir = %old_dir.display(), %err, "cannot remove the old database yet");
        }
        Ok(())
    }
}

#[cfg(test)]
impl SledBackend {
    /// Opens the database at `path` again in this process. A dropped sled
    /// database lets go of its file lock only when its background flusher
    /// thread has ended, a moment after the drop, so a lock refusal is
    /// retried (bounded: a lock that is never released still fails).
    pub fn reopen(path: &std::path::Path) -> SledBackend {
        for _ in 0..100 {
            match SledBackend::open(path) {
                Err(err) if err.to_string().contains("could not acquire lock") => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => return other.unwrap(),
            }
        }
        SledBackend::open(path).unwrap()
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
        let backend = SledBackend::reopen(dir.path());
        let pairs = backend.scan(Space::Mvcc, b"a", None).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(backend.get(Space::Raft, b"a").unwrap(), None);
        let last = backend.last_in(Space::Mvcc, b"a", b"z").unwrap().unwrap();
        assert_eq!(last.0, b"b".to_vec());
    }

    #[test]
    fn defragment_keeps_every_pair_gives_space_back_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let backend = SledBackend::open(&path).unwrap();
        for round in 0..20u32 {
            let mut batch = WriteBatch::default();
            for i in 0..200u32 {
                batch.put(format!("k{i:04}").into_bytes(), vec![round as u8; 4096]);
            }
            backend.write(Space::Mvcc, batch).unwrap();
            backend.flush().unwrap();
        }
        let mut batch = WriteBatch::default();
        for i in 10..200u32 {
            batch.delete(format!("k{i:04}").into_bytes());
        }
        backend.write(Space::Mvcc, batch).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"member".to_vec(), b"me".to_vec());
        backend.write(Space::Raft, batch).unwrap();
        backend.flush().unwrap();
        let before = backend.size_on_disk();
        backend.defragment().unwrap();
        let after = backend.size_on_disk();
        assert!(after < before, "defragmented {before} -> {after} bytes");
        assert_eq!(backend.scan(Space::Mvcc, b"", None).unwrap().len(), 10);
        assert!(!path.exists(), "the old database is gone");
        drop(backend);
        let reopened = SledBackend::reopen(&path);
        assert_eq!(reopened.scan(Space::Mvcc, b"", None).unwrap().len(), 10);
        assert_eq!(
            reopened.get(Space::Raft, b"member").unwrap().unwrap(),
            b"me"
        );
        reopened.defragment().unwrap();
        drop(reopened);
        let again = SledBackend::reopen(&path);
        assert_eq!(again.get(Space::Mvcc, b"k0009").unwrap().unwrap()[0], 19);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 2, "one database and its pointer: {left:?}");
    }
}
