//! The durable, ordered key-value backend under the raft log and the MVCC
//! state machine.
//!
//! Everything above talks to the [`Backend`] trait so the engine can be swapped
//! (sled 0.34 has known crash-consistency gaps; see shared/reference/etcd.md §6).
//! The contract: a [`WriteBatch`] is applied atomically within one [`Space`],
//! and nothing is durable until [`Backend::flush`] returns.

mod backend;
mod private_dir;
mod sled_backend;
mod write_behind;

pub use backend::{for_each_pair, Backend, Change, Pair, Space, WriteBatch, LARGE_BATCH};
pub use private_dir::ensure_private_dir;
pub use sled_backend::SledBackend;
pub use write_behind::WriteBehind;
