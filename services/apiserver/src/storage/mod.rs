//! Storage: objects as JSON under `<prefix>/<resource>/[<ns>/]<name>` in
//! any etcd-v3 store. Create is a transaction on `create_revision == 0`,
//! update and delete compare `mod_revision`, and the object's
//! `resourceVersion` is the store revision of its last write (it is not
//! stored inside the value; it is set when the value is read).

mod claims;
pub mod compactor;
mod connection;
mod errors;
mod etcd;
mod leases;

pub use claims::{ClaimError, CLAIMS};
pub use connection::{Call, Connection, StoreMetrics, StoreWatch};
pub use errors::StorageError;
pub use etcd::{decode, Freshness, Listing, Store, Stored};
pub use leases::Leases;
