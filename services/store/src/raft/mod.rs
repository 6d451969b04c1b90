//! Consensus: the raft-rs `RawNode`, its persistent log, and the Ready loop
//! that persists, applies and answers.
//!
//! Every write — even on a single member — is proposed, appended to the log
//! in the backend, committed, and applied from the committed entries. The
//! Ready loop runs on its own thread and owns the node; clients talk to it
//! through a [`RaftHandle`].

mod handle;
mod logger;
mod node;
mod storage;
mod transport;

pub use handle::{RaftHandle, RaftStatus};
pub use transport::{GrpcTransport, Transport};
pub use node::{start_node, NodeConfig};
pub use storage::{RaftLog, BOOTSTRAP_INDEX};
