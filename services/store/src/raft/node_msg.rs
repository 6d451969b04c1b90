//! What other threads and tasks tell the Ready loop: clients' proposals
//! and reads, peers' messages and links, the persist threads' reports.

use capstan_proto::internal::MemberRecord;
use tokio::sync::oneshot;
use tokio_rustls::rustls;

use crate::apply::ApplyOutcome;
use crate::error::Result;

/// A message to the Ready loop (from clients, peers and the transport).
pub enum NodeMsg {
    Propose {
        id: u64,
        data: Vec<u8>,
        done: oneshot::Sender<Result<ApplyOutcome>>,
    },
    ReadIndex {
        done: oneshot::Sender<u64>,
    },
    /// A raft message from a peer.
    Step(Box<raft::eraftpb::Message>),
    /// The transport could not deliver to this peer.
    Unreachable {
        to: u64,
    },
    /// How sending a snapshot to this peer ended.
    SnapshotReport {
        to: u64,
        status: raft::SnapshotStatus,
    },
    /// A membership change; `record` describes the member it concerns.
    ConfChange {
        id: u64,
        change: raft::eraftpb::ConfChangeV2,
        record: MemberRecord,
        done: oneshot::Sender<Result<ApplyOutcome>>,
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
    /// The persist thread made the Readies up to this number durable.
    Persisted {
        number: u64,
    },
    /// The state machine is durable up to this applied index.
    StateFlushed {
        upto: u64,
    },
    /// The runtime connected the direct link to `to` (`wire/dial.rs`).
    LinkUp {
        to: u64,
        generation: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    },
    /// Peer `from` dialed a direct link to this member (`wire/accept.rs`).
    LinkFrom {
        from: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    },
}
