//! The multi-version key-value state machine.
//!
//! Every change gets a [`Revision`]; each key keeps its history of revisions in
//! an in-memory [`KeyIndex`](index::KeyIndex), while the values live in the
//! backend keyed by revision, so historical reads and watch replay are a scan
//! of the backend. This layer knows nothing of raft or of etcd's request
//! options: `apply` turns requests into calls on [`MvccStore`].
//!
//! Layout in the backend's MVCC space:
//! - `r` + main (8 bytes BE) + sub (8 bytes BE) → `StoredRevision`
//! - `l` + lease id (8 bytes BE) → `StoredLease`
//! - `m/…` → meta records (applied index, current and compacted revision)

mod compactor;
mod dump;
mod index;
mod key_history;
mod key_range;
mod replace;
mod revision;
mod state;
mod store;
mod write;

pub use dump::Dumped;
pub use key_range::KeyRange;
pub use replace::Fill;
pub use revision::Revision;
pub use revision::REVISION_PREFIX;
pub use state::{RangeOutput, META_APPLIED_INDEX, META_COMPACT_REV, META_CURRENT_REV};
pub use store::MvccStore;
pub use write::{Committed, WriteGroup, WriteView};
