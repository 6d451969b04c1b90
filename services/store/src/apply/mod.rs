//! Apply: turns committed raft entries into MVCC writes.
//!
//! Each entry is one `RaftRequest`; it is applied in one MVCC write view.
//! The views of a run of entries (a Ready's committed entries) are written
//! to the backend in one batch with the last one's raft index
//! ([`ApplyBatch`]); their events are then handed to the watch hub, and the
//! outcomes go back to the member that proposed them.

pub mod alarms;
mod applier;
pub mod auth;
mod batch;
mod kv;
mod lease;
mod outcome;
pub mod range;

pub use alarms::Alarms;
pub use applier::Applier;
pub use batch::ApplyBatch;
pub use lease::{lease_key, restore_leases, LEASE_PREFIX};
pub use outcome::{unexpected, Applied, ApplyOutcome};
