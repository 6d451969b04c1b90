//! Reads that must reflect the store: the cache answers them once it
//! holds what one linearizable read of the store says is there (see
//! `storage::Freshness`), as kube-apiserver's consistent reads from its
//! watch cache do; a revision the store has not reached is waited for a
//! little, then refused as too large.

use std::time::Duration;

use tokio::time::Instant;

use super::cacher::Cacher;
use crate::storage::{Freshness, ReadAt, StorageError};

/// How long a consistent read waits for the cache to catch up with the
/// revision a linearizable read of the store returned, and a read at a
/// future revision waits for the store to reach it.
pub const CATCH_UP: Duration = Duration::from_secs(3);
/// How long a consistent read waits for the store's linearizable answer.
const STORE_READ: Duration = Duration::from_secs(10);
/// How often a read at a revision the store has not reached asks again.
const FUTURE_POLL: Duration = Duration::from_millis(100);

impl Cacher {
    /// Waits until the cache may answer a read of `key` (or of every key
    /// under it, when `prefix`) as `at` says; the revision to report.
    /// `Any`, or a revision the cache has reached, is at once.
    pub(super) async fn fresh(
        &self,
        key: &str,
        prefix: bool,
        at: ReadAt,
    ) -> Result<i64, StorageError> {
        let now = self.revision();
        if at == ReadAt::Any || at.minimum().is_some_and(|min| now >= min) {
            return Ok(now);
        }
        let store = self.store_reached(key, prefix, at.minimum()).await?;
        let mut changes = self.revisions.subscribe();
        let deadline = Instant::now() + CATCH_UP;
        loop {
            {
                let cache = self.cache();
                if cache.is_fresh(key, prefix, &store) {
                    return Ok(cache.revision().max(store.revision));
                }
            }
            let changed = tokio::time::timeout_at(deadline, changes.changed()).await;
            if !matches!(changed, Ok(Ok(()))) {
                return Err(StorageError::CacheBehind(format!(
                    "the watch cache of {} did not catch up with the store within {}s: \
                     the store is at revision {}, the cache at {}; try again",
                    self.prefix,
                    CATCH_UP.as_secs(),
                    store.revision,
                    self.revision()
                )));
            }
        }
    }

    /// A linearizable read of `key` (or of every key under it) once the
    /// store has reached `min`.
    async fn store_reached(
        &self,
        key: &str,
        prefix: bool,
        min: Option<i64>,
    ) -> Result<Freshness, StorageError> {
        let deadline = Instant::now() + CATCH_UP;
        loop {
            let read = tokio::time::timeout(STORE_READ, self.store.freshness(key, prefix)).await;
            let store = read.map_err(|_| {
                StorageError::Unavailable(format!(
                    "no answer to a linearizable read within {}s",
                    STORE_READ.as_secs()
                ))
            })??;
            match min {
                Some(min) if min > store.revision => {
                    if Instant::now() + FUTURE_POLL >= deadline {
                        return Err(StorageError::FutureRevision {
                            requested: min,
                            current: store.revision,
                        });
                    }
                    tokio::time::sleep(FUTURE_POLL).await;
                }
                _ => return Ok(store),
            }
        }
    }
}
