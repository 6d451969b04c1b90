//! What the transport and the Ready loop give each other: the loop hands
//! the transport messages to send ([`Transport`]) and a way back
//! ([`Feedback`]) for what the transport learns on the way ([`PeerEvent`]).

use std::sync::Arc;

use raft::eraftpb::Message;
use tokio_rustls::rustls;

/// What the transport tells the Ready loop.
pub enum PeerEvent {
    /// Messages to this peer could not be delivered.
    Unreachable { to: u64 },
    /// How sending a snapshot to this peer ended.
    SnapshotReport {
        to: u64,
        status: raft::SnapshotStatus,
    },
    /// The runtime connected the direct link to `to` (`links/dial.rs`).
    LinkUp {
        to: u64,
        generation: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    },
    /// Peer `from` dialed a direct link to this member (`links/accept.rs`).
    LinkFrom {
        from: u64,
        stream: std::net::TcpStream,
        tls: Option<Box<rustls::Connection>>,
    },
}

/// The Ready loop has stopped: nobody listens any more.
#[derive(Debug)]
pub struct LoopStopped;

/// Hands a [`PeerEvent`] to the Ready loop.
pub type Feedback = Arc<dyn Fn(PeerEvent) -> Result<(), LoopStopped> + Send + Sync>;

/// Where raft messages go. A single-member group needs none.
pub trait Transport: Send + Sync + 'static {
    /// Where unreachable and snapshot reports go; set once the node runs.
    fn set_feedback(&self, feedback: Feedback);
    fn send(&self, messages: Vec<Message>);
    /// Replaces the set of peers (id → peer URLs) after a membership change.
    fn set_peers(&self, peers: Vec<(u64, Vec<String>)>);
}
