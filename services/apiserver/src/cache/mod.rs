//! The watch cache of one resource type and the Cacher around it: current
//! objects plus a sliding window of recent events, fed by one store watch
//! on the type's prefix, answering reads and watches from memory behind
//! `storage::Interface`. The resource actor owns its type's Cacher.

mod cacher;
mod feed;
mod fresh;
mod unreadable;
mod watch_cache;

pub use cacher::{Cacher, WatchRequest, WINDOW};
pub use fresh::CATCH_UP;
pub use watch_cache::{Event, EventType, Filter, WatchCache, WatchItem, Watcher, WATCHER_BUFFER};

#[cfg(test)]
pub(crate) mod cacher_tests;
