//! [`Backend::load`] on two threads, for a snapshot install.
//!
//! The install's thread decodes the snapshot and builds the index; sled's
//! inserts were most of its time. They scale to a second core: 1,000,000
//! pairs of 300 bytes, each batch in key order, took 3.0-3.8 s on one
//! thread and 2.0-2.3 s on two (three were slower again on two cores).
//! Batches alternate between the loaders; the order between batches does
//! not matter to a load (see [`Backend::load`]), and [`ParallelLoad::finish`]
//! returns only once every batch is in.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

use super::{Backend, Pair, Space};
use crate::error::{Result, StoreError};

const LOADERS: usize = 2;

struct Loader<'scope> {
    batches: SyncSender<Vec<Pair>>,
    thread: ScopedJoinHandle<'scope, Result<()>>,
}

pub struct ParallelLoad<'scope> {
    loaders: Vec<Loader<'scope>>,
    next: usize,
}

impl<'scope> ParallelLoad<'scope> {
    /// Starts the loaders on `scope`; each holds at most one batch waiting,
    /// so memory stays bounded however fast the caller decodes.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        backend: &'env dyn Backend,
        space: Space,
    ) -> Self {
        let loaders = (0..LOADERS)
            .map(|_| {
                let (batches, queue) = sync_channel::<Vec<Pair>>(1);
                let thread = scope.spawn(move || {
                    for pairs in queue {
                        backend.load(space, pairs)?;
                    }
                    Ok(())
                });
                Loader { batches, thread }
            })
            .collect();
        ParallelLoad { loaders, next: 0 }
    }

    /// Hands `pairs` to the next loader. A loader that stopped on an error
    /// has dropped its queue: its error comes back here.
    pub fn load(&mut self, pairs: Vec<Pair>) -> Result<()> {
        let Some(loader) = self.loaders.get(self.next) else {
            return Err(stopped());
        };
        self.next = (self.next + 1) % self.loaders.len();
        if loader.batches.send(pairs).is_ok() {
            return Ok(());
        }
        join_all(std::mem::take(&mut self.loaders)).and(Err(stopped()))
    }

    /// Waits until every batch handed over is loaded; the first error if
    /// a loader failed.
    pub fn finish(self) -> Result<()> {
        join_all(self.loaders)
    }
}

fn stopped() -> StoreError {
    StoreError::Storage("a snapshot loader stopped".into())
}

fn join_all(loaders: Vec<Loader<'_>>) -> Result<()> {
    let mut outcome = Ok(());
    for Loader { batches, thread } in loaders {
        // The loader's queue ends here: it returns once it has loaded
        // what is queued.
        drop(batches);
        let result = thread
            .join()
            .unwrap_or_else(|_| Err(StoreError::Storage("a snapshot loader panicked".into())));
        outcome = outcome.and(result);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::SledBackend;

    fn pair(i: u32) -> Pair {
        (i.to_be_bytes().to_vec(), vec![i as u8; 16])
    }

    #[test]
    fn every_batch_is_in_once_finish_returns() {
        let dir = tempfile::tempdir().unwrap();
        let backend = SledBackend::reopen(dir.path());
        std::thread::scope(|scope| {
            let mut load = ParallelLoad::start(scope, &backend, Space::Mvcc);
            for batch in 0..9u32 {
                load.load((batch * 100..batch * 100 + 100).map(pair).collect())
                    .unwrap();
            }
            load.finish().unwrap();
        });
        let loaded = backend.scan(Space::Mvcc, &[], None).unwrap();
        assert_eq!(loaded, (0..900).map(pair).collect::<Vec<_>>());
    }
}
