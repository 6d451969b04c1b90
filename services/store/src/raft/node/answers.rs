//! The answers to a run of applied proposals, and to a ReadIndex round's
//! readers, gathered by lane and handed to each lane's runtime as one
//! batch (see `raft/lanes.rs` for why a batch, and why per runtime).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::apply::ApplyOutcome;
use crate::error::Result;
use crate::raft::lanes::{Batch, Lanes, ProposalReply, Reply};

/// A proposer waiting for its entry to be applied.
pub(super) struct Waiter {
    pub since: Instant,
    pub reply: ProposalReply,
}

impl Waiter {
    pub fn new(reply: ProposalReply) -> Self {
        Waiter {
            since: Instant::now(),
            reply,
        }
    }
}

type Answer = (oneshot::Sender<Result<ApplyOutcome>>, Result<ApplyOutcome>);

pub(super) struct Answers {
    lanes: Arc<Lanes>,
    /// What was pushed since the last send, by lane.
    batches: Vec<Vec<Answer>>,
}

impl Answers {
    pub(super) fn new(lanes: Arc<Lanes>) -> Answers {
        Answers {
            lanes,
            batches: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, reply: ProposalReply, result: Result<ApplyOutcome>) {
        if self.batches.len() <= reply.lane {
            self.batches.resize_with(reply.lane + 1, Vec::new);
        }
        self.batches[reply.lane].push((reply.done, result));
    }

    /// Sends what was pushed since the last call, one batch per lane.
    pub(super) fn send(&mut self) {
        for (lane, batch) in self.batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                let answers = std::mem::take(batch);
                self.lanes.hand_over(lane, Batch::Proposals(answers));
            }
        }
    }

    /// Tells the readers of a ReadIndex round the index they may read at.
    pub(super) fn send_reads(&mut self, index: u64, readers: Vec<Reply<u64>>) {
        let mut by_lane: Vec<Vec<oneshot::Sender<u64>>> = Vec::new();
        for reader in readers {
            if by_lane.len() <= reader.lane {
                by_lane.resize_with(reader.lane + 1, Vec::new);
            }
            by_lane[reader.lane].push(reader.done);
        }
        for (lane, readers) in by_lane.into_iter().enumerate() {
            if !readers.is_empty() {
                self.lanes.hand_over(lane, Batch::Reads(index, readers));
            }
        }
    }
}
