//! Automatic compaction, as etcd's `--auto-compaction-*` flags configure it.
//!
//! Periodic mode samples the revision as time passes and compacts to the
//! revision seen one retention period ago; revision mode keeps the newest
//! N revisions. Only the leader proposes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::CompactionRequest;
use capstan_proto::internal::raft_request::Request;

use crate::config::CompactionPolicy;
use crate::server::Context;

pub async fn run_auto_compaction(ctx: Arc<Context>, policy: CompactionPolicy) {
    let check_every = match policy {
        CompactionPolicy::Off => return,
        // etcd checks ten times per period, at most hourly.
        CompactionPolicy::Periodic(period) => {
            (period / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
        }
        CompactionPolicy::KeepRevisions(_) => Duration::from_secs(60),
    };
    let mut samples: VecDeque<(Instant, i64)> = VecDeque::new();
    let mut ticker = tokio::time::interval(check_every);
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let current = ctx.mvcc.current_revision();
        samples.push_back((now, current));
        let target = match policy {
            CompactionPolicy::Periodic(period) => periodic_target(&mut samples, now, period),
            CompactionPolicy::KeepRevisions(keep) => Some(current - keep),
            CompactionPolicy::Off => None,
        };
        let Some(target) = target else { continue };
        if !ctx.raft.status().is_leader() || target <= ctx.mvcc.compact_revision() {
            continue;
        }
        let request = Request::Compaction(CompactionRequest {
            revision: target,
            physical: true,
        });
        match ctx.raft.propose(request).await {
            Ok(_) => tracing::info!(revision = target, "auto-compacted history"),
            Err(err) => tracing::warn!(revision = target, %err, "auto-compaction failed"),
        }
    }
}

/// The newest revision sampled at least `period` ago; older samples go.
fn periodic_target(
    samples: &mut VecDeque<(Instant, i64)>,
    now: Instant,
    period: Duration,
) -> Option<i64> {
    let mut target = None;
    while let Some(&(at, revision)) = samples.front() {
        if now.duration_since(at) < period {
            break;
        }
        target = Some(revision);
        samples.pop_front();
    }
    target
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_target_is_the_revision_one_period_ago() {
        let start = Instant::now();
        let mut samples: VecDeque<_> = (0..10)
            .map(|i| (start + Duration::from_secs(i), 100 + i as i64))
            .collect();
        let now = start + Duration::from_secs(12);
        assert_eq!(
            periodic_target(&mut samples, now, Duration::from_secs(5)),
            Some(107)
        );
        assert_eq!(samples.len(), 2);
        assert_eq!(
            periodic_target(&mut samples, now, Duration::from_secs(5)),
            None
        );
    }
}
