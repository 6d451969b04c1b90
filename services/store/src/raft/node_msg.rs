//! What other threads and tasks tell the Ready loop: clients' proposals
//! and reads, peers' messages and links, the disk threads' reports.

use capstan_proto::internal::MemberRecord;
use tokio::sync::oneshot;

use super::lanes::{ProposalReply, Reply};
use crate::transport::PeerEvent;

/// A message to the Ready loop (from clients, peers and the transport).
pub enum NodeMsg {
    Propose {
        id: u64,
        data: Vec<u8>,
        reply: ProposalReply,
    },
    ReadIndex {
        reply: Reply<u64>,
    },
    /// A raft message from a peer (over gRPC; the direct links' messages
    /// are read by the loop itself).
    Step(Box<raft::eraftpb::Message>),
    /// What the transport learned: a peer unreachable, a snapshot sent, a
    /// direct link connected.
    Peer(PeerEvent),
    /// A membership change; `record` describes the member it concerns.
    ConfChange {
        id: u64,
        change: raft::eraftpb::ConfChangeV2,
        record: MemberRecord,
        reply: ProposalReply,
    },
    TransferLeader {
        to: u64,
    },
    /// Whether a learner has caught up with the leader's log (None when
    /// this member is not the leader and cannot tell).
    LearnerInSync {
        id: u64,
        done: oneshot::Sender<Option<bool>>,
    },
    /// The log's sync thread made the Readies up to this number durable.
    Persisted {
        number: u64,
    },
    /// The state machine is durable up to this applied index.
    StateFlushed {
        upto: u64,
    },
}
