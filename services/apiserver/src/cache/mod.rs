//! The watch cache of one resource type: current objects plus a sliding
//! window of recent events, fed by one store watch on the type's prefix.
//! Pure state; the resource actor owns it and feeds it.

mod watch_cache;

pub use watch_cache::{Event, EventType, WatchCache, WatchItem, Watcher, WATCHER_BUFFER};
