//! The contract every engine keeps: keyspaces, atomic batches, ordered
//! scans, and durability only once [`Backend::flush`] returns.

use crate::error::Result;

/// The separate keyspaces the store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// This member's identity and the metadata of the last installed
    /// snapshot (the raft log itself is in its own file, `raft::wal`).
    Raft,
    /// MVCC revisions, leases and the applied index, written together.
    Mvcc,
}

/// Writes at least this many at once (the deletions that start a snapshot
/// install, a restore) are handed to the engine straight away, not
/// gathered in memory first; an install loads its pairs this many at a time.
pub const LARGE_BATCH: usize = 16_384;

/// One atomic group of writes to a single [`Space`].
#[derive(Debug, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WriteBatch {
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push((key.into(), Some(value.into())));
    }

    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push((key.into(), None));
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }
}

/// A key-value pair read from the backend.
pub type Pair = (Vec<u8>, Vec<u8>);

/// A key and its new value, borrowed; None deletes the key.
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// Calls `visit` with every pair of `space` in `[start, end)`, in key
/// order, reading `page` pairs at a time: a whole space can be larger
/// than memory, and one vector of it is moved again at every doubling.
pub fn for_each_pair(
    backend: &dyn Backend,
    space: Space,
    start: &[u8],
    end: Option<&[u8]>,
    page: usize,
    mut visit: impl FnMut(Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<()> {
    let mut from = start.to_vec();
    loop {
        let pairs = backend.scan_limit(space, &from, end, page)?;
        let full = pairs.len() == page;
        for (key, value) in pairs {
            from.clone_from(&key);
            from.push(0); // the next page starts right after this key
            visit(key, value)?;
        }
        if !full {
            return Ok(());
        }
    }
}

/// An ordered, durable key-value engine.
pub trait Backend: Send + Sync + 'static {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Pairs with `start <= key < end` in key order (`end = None`: to the end).
    fn scan(&self, space: Space, start: &[u8], end: Option<&[u8]>) -> Result<Vec<Pair>>;

    /// Like [`Backend::scan`] but stops after `limit` pairs.
    fn scan_limit(
        &self,
        space: Space,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Pair>>;

    /// The last pair with `start <= key < end`, if any.
    fn last_in(&self, space: Space, start: &[u8], end: &[u8]) -> Result<Option<Pair>>;

    /// Applies `batch` atomically. Not durable until [`Backend::flush`].
    fn write(&self, space: Space, batch: WriteBatch) -> Result<()>;

    /// [`Backend::write`] of changes read in place, for a caller that keeps
    /// them: the engine copies each key and value once, into its own buffers.
    fn write_from(
        &self,
        space: Space,
        changes: &mut dyn Iterator<Item = Change<'_>>,
    ) -> Result<()> {
        let ops = changes
            .map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec)))
            .collect();
        self.write(space, WriteBatch { ops })
    }

    /// Writes `pairs` one at a time, not atomically: for a bulk load the
    /// engine takes pairs in key order faster that way than as one batch.
    /// The caller must cope with a crash that cuts the load short (a
    /// snapshot install marks itself and starts over). Writes made after
    /// it are recovered only with it, as for [`Backend::write`].
    fn load(&self, space: Space, pairs: Vec<Pair>) -> Result<()>;

    /// Makes every earlier write durable (fsync).
    fn flush(&self) -> Result<()>;

    /// Bytes the engine occupies on disk.
    fn size_on_disk(&self) -> u64;

    /// Rewrites the database compactly, giving the space of deleted data
    /// back to the file system. Reads and writes wait meanwhile.
    fn defragment(&self) -> Result<()>;

    /// Writes accepted but not yet handed to the engine (see
    /// `write_behind.rs`); background work waits for this to drop rather
    /// than outrun the engine.
    fn backlog(&self) -> usize {
        0
    }
}
