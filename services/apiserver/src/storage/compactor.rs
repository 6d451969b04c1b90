//! Compaction of the store's history, as kube-apiserver does it: every
//! interval the history older than one interval is compacted away, so the
//! store keeps about one interval of old revisions for watches and
//! paginated lists to resume from.
//!
//! Several API servers may share a store; they agree on who compacts
//! without talking to each other through one key, `compact_rev_key`
//! (outside the storage prefix, as kube-apiserver keeps it, so that
//! kube-apiservers and these can share a store too). Each tick, an API
//! server writes that key only if its version is still the one the server
//! saw last tick (a compare-and-swap on the version, which every write
//! bumps). The first to tick in an interval wins and compacts at the
//! revision it saw one interval ago; the others' compare fails, and they
//! adopt the version they find, to compete again next interval. So the
//! key's version grows by one per interval however many servers there are.

use std::time::Duration;

use capstan_proto::etcdserverpb::response_op::Response;

use super::connection::{Call, Connection};
use super::kv;
use super::StorageError;

/// The key whose version orders the compactions (kube-apiserver's name).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("compare-and-swap on {COMPACT_REV_KEY}: {0}")]
    Swap(StorageError),
    #[error("compacting at revision {revision}: {source}")]
    Compact { revision: i64, source: StorageError },
}

/// What one API server knows of the schedule between ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Schedule {
    /// The version of [`COMPACT_REV_KEY`] after the last tick.
    version: i64,
    /// The store's revision at the last tick: what the next won tick
    /// compacts at (0: none yet, as right after start).
    revision: i64,
}

impl Schedule {
    /// Takes the outcome of a tick's compare-and-swap: whether it won,
    /// the key's version it found if not, and the store's revision. The
    /// revision to compact at, if this server is to compact.
    pub fn after_swap(&mut self, won: bool, found_version: i64, revision: i64) -> Option<i64> {
        let compact = Some(self.revision).filter(|r| won && *r > 0);
        self.version = match won {
            true => self.version + 1,
            false => found_version,
        };
        self.revision = revision;
        compact
    }
}

/// Compacts every `interval` until the task is dropped.
pub async fn run(connection: Connection, interval: Duration) {
    let mut schedule = Schedule::default();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    // A tick missed while the store was unreachable is not made up for.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match tick(&connection, &mut schedule).await {
            Ok(Some(revision)) => tracing::info!(revision, "compacted the store's history"),
            Ok(None) => {}
            Err(err) => tracing::warn!(%err, "compaction failed; trying again next interval"),
        }
    }
}

/// One tick: the compare-and-swap, then the compaction if this server won
/// and has a revision from the tick before. The revision compacted at.
pub async fn tick(
    connection: &Connection,
    schedule: &mut Schedule,
) -> Result<Option<i64>, CompactError> {
    let txn = kv::txn(
        vec![kv::version_is(COMPACT_REV_KEY, schedule.version)],
        vec![kv::put(
            COMPACT_REV_KEY,
            schedule.revision.to_string().into_bytes(),
            None,
        )],
        vec![kv::get(COMPACT_REV_KEY)],
    );
    let response = connection
        .kv(Call::Write, |kv| kv.txn(txn.clone()))
        .await
        .map_err(CompactError::Swap)?;
    let revision = kv::revision_of(&response.header);
    let found_version = match response
        .responses
        .first()
        .and_then(|op| op.response.as_ref())
    {
        Some(Response::ResponseRange(read)) => read.kvs.first().map_or(0, |kv| kv.version),
        _ => 0,
    };
    let Some(at) = schedule.after_swap(response.succeeded, found_version, revision) else {
        return Ok(None);
    };
    compact(connection, at).await?;
    Ok(Some(at))
}

/// Compacts at `revision`; already compacted there (by the store's own
/// auto-compaction, say) is as good.
async fn compact(connection: &Connection, revision: i64) -> Result<(), CompactError> {
    // Compacting twice at one revision is harmless, so it may be retried.
    let compacted = connection
        .unary(Call::Read, |client| async move {
            client.kv_client().compact(revision, None).await
        })
        .await;
    match compacted {
        Ok(_) | Err(StorageError::Compacted { .. }) => Ok(()),
        Err(source) => Err(CompactError::Compact { revision, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_won_tick_only_records_a_revision() {
        let mut schedule = Schedule::default();
        assert_eq!(schedule.after_swap(true, 0, 10), None);
        assert_eq!(schedule.after_swap(true, 0, 25), Some(10));
        assert_eq!(schedule.after_swap(true, 0, 40), Some(25));
        assert_eq!(schedule.version, 3);
    }

    #[test]
    fn two_servers_compact_once_per_interval() {
        let (mut a, mut b) = (Schedule::default(), Schedule::default());
        // The key's version in the store, as the compare-and-swap sees it.
        let mut version = 0;
        let mut swap = |s: &mut Schedule, revision: i64| {
            let won = s.version == version;
            if won {
                version += 1;
            }
            s.after_swap(won, version, revision)
        };
        let mut compactions = Vec::new();
        for interval in 0..5 {
            let revision = interval * 100;
            compactions.extend(swap(&mut a, revision + 1));
            compactions.extend(swap(&mut b, revision + 50));
        }
        // a ticks first in every interval and wins each; b only follows.
        assert_eq!(compactions, vec![1, 101, 201, 301]);
        assert_eq!(version, 5);
    }
}
