//! The client side of the Ready loop: proposing requests and obtaining
//! linearizable read barriers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_proto::internal::{raft_request::Request, Caller, MemberRecord, RaftRequest};
use prost::Message;
use tokio::sync::{oneshot, watch};
use tokio::time::{timeout, Instant};

use super::inbox::InboxSender;
use super::lanes::{Lanes, Reply};
use super::node_msg::NodeMsg;
use crate::apply::ApplyOutcome;
use crate::error::{Result, StoreError};
use crate::transport::Feedback;

/// What the Ready loop publishes about the node, for status and headers.
#[derive(Debug, Default)]
pub struct RaftStatus {
    pub member_id: u64,
    pub leader: AtomicU64,
    pub term: AtomicU64,
    pub last_index: AtomicU64,
    pub commit: AtomicU64,
    pub applied: AtomicU64,
}

impl RaftStatus {
    pub fn leader(&self) -> u64 {
        self.leader.load(Ordering::Acquire)
    }

    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Acquire)
    }

    pub fn is_leader(&self) -> bool {
        self.leader() == self.member_id
    }
}

/// How long one ReadIndex round may take before it is retried; raft-rs
/// drops read requests silently while a new leader has not committed yet.
const READ_INDEX_ATTEMPT: Duration = Duration::from_millis(500);

#[derive(Clone)]
pub struct RaftHandle {
    pub(crate) tx: InboxSender,
    pub(crate) status: Arc<RaftStatus>,
    pub(crate) applied: watch::Receiver<u64>,
    pub(crate) next_id: Arc<AtomicU64>,
    pub(crate) request_timeout: Duration,
    /// The ways back to the runtimes that wait on the loop.
    pub(crate) lanes: Arc<Lanes>,
}

impl RaftHandle {
    pub fn status(&self) -> &RaftStatus {
        &self.status
    }

    /// Has the Ready loop answer the callers on this thread's runtime by a
    /// lane of its own (see `lanes.rs`); for runtimes that serve requests.
    pub fn open_answer_lane(&self) -> Option<usize> {
        self.lanes.open()
    }

    /// Proposes the member's own `request` (lease expiry, attributes,
    /// compaction: trusted, no access check) and waits until this member
    /// has applied it.
    pub async fn propose(&self, request: Request) -> Result<ApplyOutcome> {
        self.propose_as(None, request).await
    }

    /// Proposes a client's `request`, which is applied only if `caller`
    /// may make it; `None` is the member itself.
    pub async fn propose_as(
        &self,
        caller: Option<Caller>,
        request: Request,
    ) -> Result<ApplyOutcome> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let data = RaftRequest {
            id,
            request: Some(request),
            caller,
        }
        .encode_to_vec();
        let (done, wait) = oneshot::channel();
        self.tx
            .send(NodeMsg::Propose {
                id,
                data,
                reply: Reply::here(done),
            })
            .map_err(|_| StoreError::Stopped)?;
        self.wait_outcome(wait).await
    }

    /// Hands a message from a peer to the raft loop.
    pub fn step(&self, message: raft::eraftpb::Message) -> Result<()> {
        self.tx
            .send(NodeMsg::Step(Box::new(message)))
            .map_err(|_| StoreError::Stopped)
    }

    /// Where the peer port's listener hands the Ready loop the direct
    /// links its peers dial.
    pub fn peer_feedback(&self) -> Feedback {
        self.tx.peer_feedback()
    }

    /// Proposes a membership change and waits until this member applied it.
    pub async fn change_membership(
        &self,
        change: raft::eraftpb::ConfChangeV2,
        record: MemberRecord,
    ) -> Result<ApplyOutcome> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done, wait) = oneshot::channel();
        self.tx
            .send(NodeMsg::ConfChange {
                id,
                change,
                record,
                reply: Reply::here(done),
            })
            .map_err(|_| StoreError::Stopped)?;
        self.wait_outcome(wait).await
    }

    /// On the leader: whether learner `id` has caught up (etcd promotes a
    /// learner only then). None on other members.
    pub async fn learner_in_sync(&self, id: u64) -> Result<Option<bool>> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(NodeMsg::LearnerInSync { id, done })
            .map_err(|_| StoreError::Stopped)?;
        wait.await.map_err(|_| StoreError::Stopped)
    }

    pub fn transfer_leader(&self, to: u64) -> Result<()> {
        self.tx
            .send(NodeMsg::TransferLeader { to })
            .map_err(|_| StoreError::Stopped)
    }

    async fn wait_outcome(
        &self,
        wait: oneshot::Receiver<Result<ApplyOutcome>>,
    ) -> Result<ApplyOutcome> {
        match timeout(self.request_timeout, wait).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Stopped),
            Err(_) if self.status.leader() == 0 => Err(StoreError::NoLeader),
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// Returns once this member has applied everything committed before the
    /// call: a linearizable read may then be served locally.
    pub async fn read_barrier(&self) -> Result<()> {
        let deadline = Instant::now() + self.request_timeout;
        loop {
            let (done, wait) = oneshot::channel();
            self.tx
                .send(NodeMsg::ReadIndex {
                    reply: Reply::here(done),
                })
                .map_err(|_| StoreError::Stopped)?;
            let attempt = deadline.min(Instant::now() + READ_INDEX_ATTEMPT);
            if let Ok(Ok(index)) = tokio::time::timeout_at(attempt, wait).await {
                return self.wait_applied(index, deadline).await;
            }
            if Instant::now() >= deadline {
                return Err(if self.status.leader() == 0 {
                    StoreError::NoLeader
                } else {
                    StoreError::Timeout
                });
            }
        }
    }

    /// Returns once this member has applied raft `index`, or fails with
    /// a timeout after `patience`.
    pub async fn wait_applied_index(&self, index: u64, patience: Duration) -> Result<()> {
        self.wait_applied(index, Instant::now() + patience).await
    }

    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<()> {
        let mut applied = self.applied.clone();
        let reached = tokio::time::timeout_at(deadline, applied.wait_for(|a| *a >= index)).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Stopped),
            Err(_) => Err(StoreError::Timeout),
        }
    }
}
