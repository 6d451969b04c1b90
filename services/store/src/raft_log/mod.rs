//! This member's raft log: what raft-rs reads through its `Storage`
//! ([`RaftLog`], in memory and in the `raft.wal` file), the threads that
//! make it durable beside the Ready loop, and the snapshots it hands raft
//! for members the log can no longer catch up.
//!
//! - `storage.rs`: [`RaftLog`], raft-rs's `Storage`: entries, hard state and
//!   conf state, staged into the file and synced once per Ready;
//! - `cached.rs`: the log in memory, and the bytes its entries hold;
//! - `wal.rs`: the file, CRC-framed protobuf records in preallocated space;
//! - `persist.rs`: the log's sync thread, and the thread that flushes the
//!   state machine before the front of the log is dropped;
//! - `snapshot_cut.rs`: snapshots cut on a thread of their own.

// raft-rs's protobuf-2 messages carry hidden fields, so they are built by
// assigning to a default value rather than with struct literals.
#![allow(clippy::field_reassign_with_default)]

mod cached;
mod persist;
mod snapshot_cut;
mod storage;
mod wal;

pub use persist::{spawn_log_sync, spawn_state_flusher};
pub use storage::{RaftLog, BOOTSTRAP_INDEX};
