//! Background work a member does on its own: expiring leases and
//! compacting history. Both only act on the leader and go through raft.

mod auto_compaction;
mod lease_expiry;

pub use auto_compaction::run_auto_compaction;
pub use lease_expiry::run_lease_expiry;
