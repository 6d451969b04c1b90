//! Raft messages between members. Two ways, chosen per peer URL:
//! - [`links`]: direct links the Ready loop writes and reads itself, on
//!   non-blocking sockets woken by the loop's own poller (every peer with
//!   an `http://` URL, and `https://` ones once the links have a TLS
//!   client);
//! - [`grpc`]: the peer gRPC service, for snapshots (streamed from their
//!   files) and for peers without a link.
//!
//! Neither knows the Ready loop: what they learn on the way (a peer is
//! unreachable, a snapshot was sent, a link is connected) goes back through
//! a [`Feedback`] the loop hands them.

mod backoff;
mod grpc;
mod interface;
pub mod links;

pub use grpc::GrpcTransport;
pub use interface::{Feedback, LoopStopped, PeerEvent, Transport};
