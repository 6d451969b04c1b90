//! Linearizable reads for the Ready loop: ReadIndex rounds batched per
//! turn, and forgetting the requests whose callers gave up.

use std::time::{Duration, Instant};

use raft::ReadState;

use super::Node;

impl Node {
    /// One ReadIndex round for every read that arrived since the last one.
    pub(super) fn issue_reads(&mut self) {
        if self.pending_reads.is_empty() {
            return;
        }
        // The leader keeps pending reads by context, so a context must be
        // unique across members, not just here: member id, then a counter.
        let mut ctx = self.config.member_id.to_be_bytes().to_vec();
        ctx.extend_from_slice(&self.next_read_ctx.to_be_bytes());
        self.next_read_ctx += 1;
        self.raw.read_index(ctx.clone());
        let readers = std::mem::take(&mut self.pending_reads);
        self.inflight_reads.insert(ctx, (Instant::now(), readers));
    }

    pub(super) fn answer_reads(&mut self, states: Vec<ReadState>) {
        for state in states {
            if let Some((_, readers)) = self.inflight_reads.remove(&state.request_ctx) {
                self.answers.send_reads(state.index, readers);
            }
        }
    }

    /// Forgets requests whose callers have given up: dropped read rounds are
    /// retried by the caller, and lost proposals have timed out.
    pub(super) fn expire_stale_requests(&mut self) {
        let read_limit = Duration::from_secs(1);
        self.inflight_reads
            .retain(|_, (since, _)| since.elapsed() < read_limit);
        let proposal_limit = self.config.request_timeout * 2;
        self.waiters
            .retain(|_, waiter| waiter.since.elapsed() < proposal_limit);
        let waiters = &self.waiters;
        self.proposal_index.retain(|_, id| waiters.contains_key(id));
    }
}
