//! Consensus: the raft-rs `RawNode`, its persistent log, and the Ready loop
//! that persists, applies and answers.
//!
//! Every write — even on a single member — is proposed, appended to the log
//! file and synced, committed, and applied from the committed entries. The
//! Ready loop runs on its own thread and owns the node; clients talk to it
//! through a [`RaftHandle`].

// raft-rs's protobuf-2 messages carry hidden fields, so they are built by
// assigning to a default value rather than with struct literals.
#![allow(clippy::field_reassign_with_default)]

mod backoff;
mod handle;
mod inbox;
mod logger;
mod node;
mod node_msg;
mod persist;
mod snapshot_cut;
mod storage;
mod transport;
mod wal;
pub mod wire;

pub use handle::{RaftHandle, RaftStatus};
pub use node::{start_node, NodeConfig};
pub use storage::{RaftLog, BOOTSTRAP_INDEX};
pub use transport::{GrpcTransport, Transport};
