//! [`WriteBehind`]: the state machine's writes gathered in memory and
//! handed to the engine in large batches.
//!
//! Applying one Ready used to be one sled batch, and a sled batch costs far
//! more than its writes: sled rolls its I/O buffer before and after every
//! batch, and each roll wakes one of its I/O threads to write and
//! `sync_file_range` a nearly empty buffer. With one client that was a third
//! of the store's CPU per put. Nothing about a batch needs to reach the
//! engine at once: the raft log makes an entry durable, and the state
//! machine is replayed from it after a crash. So MVCC writes land in an
//! ordered map that every read consults first, and a writer thread moves
//! them to the engine every few milliseconds as one batch (one atomic engine
//! batch covers several whole write batches, so the engine always holds a
//! prefix of the applied state, never half of one).
//!
//! Ordering is kept: a write to another [`Space`] first moves every pending
//! MVCC write into the engine, and [`Backend::flush`] does too before it
//! syncs, so "durable up to what was written before the flush" still holds.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::backend::{Backend, Pair, Space, WriteBatch, LARGE_BATCH};
use crate::error::{Result, StoreError};

/// The space whose writes are deferred (the others are written through).
const DEFERRED: Space = Space::Mvcc;
/// Longest a write waits in memory before the writer thread moves it.
const WRITE_INTERVAL: Duration = Duration::from_millis(10);
/// Pending writes at which the writer thread is woken early.
const WAKE_AT: usize = 8_192;
/// Pending writes at which a writer moves them itself, bounding memory.
const WRITE_INLINE_AT: usize = 65_536;

/// A key's pending state: `None` is a deletion.
type Changes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

#[derive(Default)]
struct Pending {
    /// Writes not yet handed to the engine, newest state per key.
    fresh: Changes,
    /// Writes being handed to the engine now; readers still see them here.
    moving: Option<Arc<Changes>>,
    /// When `fresh` got its first write.
    since: Option<Instant>,
    stop: bool,
}

struct Shared {
    engine: Box<dyn Backend>,
    pending: RwLock<Pending>,
    /// Held while a batch is moved, so moves happen one at a time, in order.
    moving: Mutex<()>,
    wake: Condvar,
    wake_lock: Mutex<()>,
}

/// A [`Backend`] that defers MVCC writes to a batch-writer thread.
pub struct WriteBehind {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl WriteBehind {
    pub fn new(engine: impl Backend) -> Result<Self> {
        let shared = Arc::new(Shared {
            engine: Box::new(engine),
            pending: RwLock::new(Pending::default()),
            moving: Mutex::new(()),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
        });
        let for_thread = shared.clone();
        let writer = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || write_loop(&for_thread))
            .map_err(|err| StoreError::Storage(format!("spawn state writer: {err}")))?;
        Ok(WriteBehind {
            shared,
            writer: Some(writer),
        })
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        self.shared.pending.write().stop = true;
        self.shared.wake.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
        if let Err(err) = self.shared.move_pending() {
            tracing::error!(%err, "cannot write the pending state on close");
        }
    }
}

fn write_loop(shared: &Shared) {
    loop {
        {
            let mut guard = shared.wake_lock.lock();
            shared.wake.wait_for(&mut guard, WRITE_INTERVAL);
        }
        let (stop, due) = {
            let pending = shared.pending.read();
            let due = pending
                .since
                .is_some_and(|since| since.elapsed() >= WRITE_INTERVAL)
                || pending.fresh.len() >= WAKE_AT;
            (pending.stop, due)
        };
        if stop {
            return;
        }
        if due {
            if let Err(err) = shared.move_pending() {
                // The applied state can no longer reach the disk; the raft
                // loop would go on acknowledging what can never be flushed.
                tracing::error!(%err, "cannot write the state machine; stopping");
                std::process::exit(2);
            }
        }
    }
}

impl Shared {
    /// Hands every pending write to the engine as one batch.
    fn move_pending(&self) -> Result<()> {
        let _one_at_a_time = self.moving.lock();
        let moving = {
            let mut pending = self.pending.write();
            if pending.fresh.is_empty() {
                return Ok(());
            }
            pending.since = None;
            let fresh = Arc::new(std::mem::take(&mut pending.fresh));
            pending.moving = Some(fresh.clone());
            fresh
        };
        // Read in place: readers see `moving` until the engine has it.
        let mut changes = moving.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
        self.engine.write_from(DEFERRED, &mut changes)?;
        self.pending.write().moving = None;
        Ok(())
    }

    /// The pending changes with keys in `[start, end)`, newest state first
    /// per key, in key order.
    fn pending_in(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let pending = self.pending.read();
        if pending.fresh.is_empty() && pending.moving.is_none() {
            return Vec::new();
        }
        let bounds = (
            Bound::Included(start.to_vec()),
            end.map_or(Bound::Unbounded, |end| Bound::Excluded(end.to_vec())),
        );
        let mut merged: Changes = BTreeMap::new();
        if let Some(moving) = &pending.moving {
            for (k, v) in moving.range::<Vec<u8>, _>(bounds.clone()) {
                merged.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in pending.fresh.range::<Vec<u8>, _>(bounds) {
            merged.insert(k.clone(), v.clone());
        }
        merged.into_iter().collect()
    }
}

impl Backend for WriteBehind {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if space == DEFERRED {
            let pending = self.shared.pending.read();
            let found = pending
                .fresh
                .get(key)
                .or_else(|| pending.moving.as_ref().and_then(|m| m.get(key)));
            if let Some(state) = found {
                return Ok(state.clone());
            }
        }
        self.shared.engine.get(space, key)
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
        let pending = match space {
            DEFERRED => self.shared.pending_in(start, end),
            _ => Vec::new(),
        };
        if pending.is_empty() {
            return self.shared.engine.scan_limit(space, start, end, limit);
        }
        // Each pending deletion can hide at most one of the engine's pairs,
        // so that many more are enough to fill `limit` after merging.
        let deletions = pending.iter().filter(|(_, v)| v.is_none()).count();
        let stored =
            self.shared
                .engine
                .scan_limit(space, start, end, limit.saturating_add(deletions))?;
        Ok(merge(stored, pending, limit))
    }

    fn last_in(&self, space: Space, start: &[u8], end: &[u8]) -> Result<Option<Pair>> {
        let pending = match space {
            DEFERRED => self.shared.pending_in(start, Some(end)),
            _ => Vec::new(),
        };
        let deleted = |key: &[u8]| {
            pending
                .binary_search_by(|(k, _)| k.as_slice().cmp(key))
                .is_ok_and(|at| pending[at].1.is_none())
        };
        let mut upper = end.to_vec();
        let stored = loop {
            match self.shared.engine.last_in(space, start, &upper)? {
                Some((key, _)) if deleted(&key) => upper = key,
                other => break other,
            }
        };
        let newest_pending = pending
            .iter()
            .rev()
            .find_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())));
        Ok(match (stored, newest_pending) {
            (Some(stored), Some(fresh)) if stored.0 > fresh.0 => Some(stored),
            (_, Some(fresh)) => Some(fresh),
            (stored, None) => stored,
        })
    }

    fn write(&self, space: Space, batch: WriteBatch) -> Result<()> {
        if space != DEFERRED || batch.len() >= LARGE_BATCH {
            self.shared.move_pending()?;
            return self.shared.engine.write(space, batch);
        }
        let waiting = {
            let mut pending = self.shared.pending.write();
            pending.since.get_or_insert_with(Instant::now);
            for (key, value) in batch.ops {
                pending.fresh.insert(key, value);
            }
            pending.fresh.len()
        };
        if waiting >= WRITE_INLINE_AT {
            self.shared.move_pending()?;
        } else if waiting >= WAKE_AT {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    fn load(&self, space: Space, pairs: Vec<Pair>) -> Result<()> {
        self.shared.move_pending()?;
        self.shared.engine.load(space, pairs)
    }

    fn flush(&self) -> Result<()> {
        self.shared.move_pending()?;
        self.shared.engine.flush()
    }

    fn size_on_disk(&self) -> u64 {
        self.shared.engine.size_on_disk()
    }

    fn defragment(&self) -> Result<()> {
        self.shared.move_pending()?;
        self.shared.engine.defragment()
    }

    fn backlog(&self) -> usize {
        let pending = self.shared.pending.read();
        pending.fresh.len() + pending.moving.as_ref().map_or(0, |moving| moving.len())
    }
}

/// Merges the engine's pairs with pending changes (which win on equal
/// keys; deletions drop the pair), keeping the first `limit`.
fn merge(stored: Vec<Pair>, pending: Vec<(Vec<u8>, Option<Vec<u8>>)>, limit: usize) -> Vec<Pair> {
    let mut out = Vec::with_capacity(limit.min(stored.len() + pending.len()));
    let mut stored = stored.into_iter().peekable();
    let mut pending = pending.into_iter().peekable();
    while out.len() < limit {
        let order = match (stored.peek(), pending.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((s, _)), Some((p, _))) => s.cmp(p),
        };
        if order == Ordering::Less {
            out.extend(stored.next());
            continue;
        }
        if order == Ordering::Equal {
            stored.next();
        }
        if let Some((key, Some(value))) = pending.next() {
            out.push((key, value));
        }
    }
    out
}

#[cfg(test)]
#[path = "write_behind_tests.rs"]
mod tests;
