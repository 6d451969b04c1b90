//! Background work a member does on its own: expiring leases and
//! compacting history (leader only), publishing this member's attributes;
//! all of it through raft.

mod auto_compaction;
mod lease_expiry;
mod publish_attributes;

pub use auto_compaction::run_auto_compaction;
pub use lease_expiry::run_lease_expiry;
pub use publish_attributes::publish_attributes;
