//! The slices this controller wrote and the cache has not shown yet
//! (kube's EndpointSliceTracker). A sync planned from a cache that lacks a
//! slice it just created would create it again; so a sync waits (fails
//! and is retried) while any write of its owner is unseen, and slice
//! events the controller caused itself do not trigger another sync.

use std::collections::HashMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;

/// What the cache should show of one slice.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expected {
    /// At least this generation.
    Generation(i64),
    /// Gone.
    Deleted,
}

/// Pending writes by owner key (`namespace/name`), then by slice uid.
#[derive(Default)]
pub struct Tracker {
    pending: Mutex<HashMap<String, HashMap<String, Expected>>>,
}

fn uid(slice: &EndpointSlice) -> &str {
    slice.metadata.uid.as_deref().unwrap_or_default()
}

fn generation(slice: &EndpointSlice) -> i64 {
    slice.metadata.generation.unwrap_or(0)
}

impl Tracker {
    /// `written` (as the API answered a create or update) is due in the cache.
    pub fn expect(&self, owner: &str, written: &EndpointSlice) {
        let mut pending = self.pending.lock();
        let slices = pending.entry(owner.to_string()).or_default();
        slices.insert(
            uid(written).to_string(),
            Expected::Generation(generation(written)),
        );
    }

    /// The slice with `uid` was deleted: the cache should lose it.
    pub fn expect_deleted(&self, owner: &str, uid: &str) {
        let mut pending = self.pending.lock();
        let slices = pending.entry(owner.to_string()).or_default();
        slices.insert(uid.to_string(), Expected::Deleted);
    }

    /// The cache took a change of `slice` (`deleted` if it went). Returns
    /// whether the change was the controller's own (no sync needed).
    pub fn observe(&self, owner: &str, slice: &EndpointSlice, deleted: bool) -> bool {
        let mut pending = self.pending.lock();
        let Some(slices) = pending.get_mut(owner) else {
            return false;
        };
        let own = match slices.get(uid(slice)) {
            Some(Expected::Deleted) => deleted,
            Some(Expected::Generation(g)) => !deleted && generation(slice) == *g,
            None => false,
        };
        let satisfied = match slices.get(uid(slice)) {
            Some(Expected::Deleted) => deleted,
            Some(Expected::Generation(g)) => deleted || generation(slice) >= *g,
            None => false,
        };
        if satisfied {
            slices.remove(uid(slice));
        }
        if slices.is_empty() {
            pending.remove(owner);
        }
        own
    }

    /// Whether the cached `slices` of `owner` still lack one of its writes.
    pub fn stale(&self, owner: &str, slices: &[std::sync::Arc<EndpointSlice>]) -> bool {
        let pending = self.pending.lock();
        let Some(expected) = pending.get(owner) else {
            return false;
        };
        expected.iter().any(|(id, expected)| {
            let cached = slices.iter().find(|s| uid(s) == id);
            match (expected, cached) {
                (Expected::Deleted, cached) => cached.is_some(),
                (Expected::Generation(g), Some(cached)) => generation(cached) < *g,
                (Expected::Generation(_), None) => true,
            }
        })
    }

    /// The owner is gone: nothing of it is awaited.
    pub fn forget(&self, owner: &str) {
        self.pending.lock().remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn slice(uid: &str, generation: i64) -> EndpointSlice {
        let mut slice = EndpointSlice::default();
        slice.metadata.uid = Some(uid.into());
        slice.metadata.generation = Some(generation);
        slice
    }

    #[test]
    fn a_write_is_awaited_until_the_cache_shows_it() {
        let tracker = Tracker::default();
        tracker.expect("ns/web", &slice("a", 2));
        assert!(tracker.stale("ns/web", &[]));
        assert!(tracker.stale("ns/web", &[Arc::new(slice("a", 1))]));
        assert!(!tracker.stale("ns/other", &[]));
        assert!(tracker.observe("ns/web", &slice("a", 2), false));
        assert!(!tracker.stale("ns/web", &[Arc::new(slice("a", 2))]));
        // Someone else's change is not the controller's own.
        assert!(!tracker.observe("ns/web", &slice("a", 3), false));
    }

    #[test]
    fn a_deletion_is_awaited_until_the_slice_leaves_the_cache() {
        let tracker = Tracker::default();
        tracker.expect_deleted("ns/web", "a");
        assert!(tracker.stale("ns/web", &[Arc::new(slice("a", 1))]));
        assert!(!tracker.stale("ns/web", &[]));
        assert!(tracker.observe("ns/web", &slice("a", 1), true));
        tracker.expect("ns/web", &slice("b", 1));
        tracker.forget("ns/web");
        assert!(!tracker.stale("ns/web", &[]));
    }
}
