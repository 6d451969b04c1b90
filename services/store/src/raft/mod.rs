//! Consensus: the raft-rs `RawNode` and the Ready loop that drives it.
//!
//! Every write — even on a single member — is proposed, appended to the log
//! (`raft_log`) and synced, committed, and applied from the committed
//! entries (`apply`). The Ready loop runs on its own thread and owns the
//! node; clients talk to it through a [`RaftHandle`], peers through the
//! transport (`transport`), whose direct links the loop drives itself.

// raft-rs's protobuf-2 messages carry hidden fields, so they are built by
// assigning to a default value rather than with struct literals.
#![allow(clippy::field_reassign_with_default)]

mod handle;
mod inbox;
mod lanes;
mod logger;
mod node;
mod node_msg;

pub use handle::{RaftHandle, RaftStatus};
pub use node::start::{start_node, NodeParts};
pub use node::NodeConfig;
