//! Watch: delivers every MVCC event after a start revision, exactly once and
//! in order, to any number of watchers.
//!
//! Watchers are *synced* (caught up: the apply loop hands them each new
//! revision's events as it happens) or *unsynced* (behind: a catch-up thread
//! replays their events from MVCC history until they reach the present).
//! A watcher whose stream cannot take more is moved back to unsynced instead
//! of blocking the apply loop, and replays from history once it drains.
//! Live events go one revision per response; replayed ones many revisions
//! per response, as etcd batches them (`batch.rs`).

mod batch;
mod filter;
mod hub;

pub use filter::WatchFilter;
pub use hub::{WatchHub, WatcherKey};
