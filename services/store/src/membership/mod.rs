//! Cluster membership as the state machine and this member know it:
//! - `identity.rs`: this member's place, as `--initial-cluster` and its
//!   first start settled it (its id, the cluster's id, the initial members);
//! - `records.rs`: the member list, one record per member in the MVCC
//!   space, changed only by applied raft entries (configuration changes and
//!   attribute updates), so every member agrees and snapshots carry it.
//!
//! The layers above use it: the applier writes the records, the transport
//! and the Ready loop follow the list, and two pieces act on it through
//! raft from where their kind lives: etcd's Cluster gRPC service
//! (`server/cluster.rs`: member add, remove, promote, update, list) and a
//! starting member publishing its name and client URLs
//! (`jobs/publish_attributes.rs`).

pub mod identity;
pub mod records;
