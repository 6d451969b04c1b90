//! Storage: objects as JSON under `<prefix>/<resource>/[<ns>/]<name>` in
//! any etcd-v3 store, behind [`Interface`] (Kubernetes' storage.Interface).
//! Create is a transaction on `create_revision == 0`, update and delete
//! compare `mod_revision`, and the object's `resourceVersion` is the store
//! revision of its last write (it is not stored inside the value; it is
//! set when the value is read). Nothing outside this module sees etcd's
//! types: watches come out as [`StoreEvent`]s.

mod claims;
pub mod compactor;
#[cfg(test)]
pub(crate) mod conformance;
#[cfg(test)]
mod conformance_in_process;
#[cfg(test)]
pub(crate) mod conformance_processes;
mod connection;
pub mod encryption;
mod errors;
mod etcd;
mod interface;
mod kv;
mod leases;
mod memory;
mod object;
mod watch;

pub use claims::CLAIMS;
pub use connection::{Call, Connection, InProcessStore, StoreMetrics};
pub use errors::StorageError;
pub use etcd::{decode, Store};
/// How an embedding process hands over a channel to its own store (with
/// its KV service, in [`InProcessStore`]).
pub use etcd_client::Channel as StoreChannel;
pub use interface::{
    Change, Earlier, EventStream, Freshness, GuaranteedUpdate, Interface, ListRequest, Listing,
    Preconditions, Predicate, Proposed, ReadAt, StorageFuture, StoreEvent, Stored,
};
pub use leases::Leases;
pub use memory::MemoryStorage;
pub use object::{text_at, FieldPaths, Object};
