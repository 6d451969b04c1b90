//! What a controller has asked for and not yet seen: kube's
//! `ControllerExpectations` with deletions tracked by pod UID. A
//! controller's caches trail the API, so right after creating N pods its
//! cache may still show too few; it records N expected creations and does
//! not act on that owner again until the watch has shown them, or five
//! minutes have passed (a creation that failed silently must not block
//! the owner forever).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// How long expectations hold before the owner is synced regardless.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone)]
struct Expected {
    creations: i64,
    /// UIDs whose deletion is expected and not yet observed.
    deletions: HashSet<String>,
    since: Instant,
}

impl Expected {
    fn fulfilled(&self) -> bool {
        self.creations <= 0 && self.deletions.is_empty()
    }
}

/// Expectations per owner key (`namespace/name`). Clones share them.
#[derive(Debug, Default, Clone)]
pub struct Expectations {
    owners: std::sync::Arc<Mutex<HashMap<String, Expected>>>,
}

impl Expectations {
    pub fn new() -> Expectations {
        Expectations::default()
    }

    /// Whether the owner may be synced: nothing pending, the pending
    /// expectations were all observed, or they expired.
    pub fn satisfied(&self, owner: &str) -> bool {
        match self.owners.lock().get(owner) {
            None => true,
            Some(expected) => {
                expected.fulfilled() || expected.since.elapsed() > EXPECTATIONS_TIMEOUT
            }
        }
    }

    /// Records that `count` pods are about to be created for `owner`
    /// (replacing what was expected before: called only when satisfied).
    pub fn expect_creations(&self, owner: &str, count: usize) {
        self.set(owner, count as i64, HashSet::new());
    }

    /// Records that the pods with these UIDs are about to be deleted.
    pub fn expect_deletions(&self, owner: &str, uids: impl IntoIterator<Item = String>) {
        self.set(owner, 0, uids.into_iter().collect());
    }

    /// Records creations and deletions about to be made in one sync
    /// (the StatefulSet and DaemonSet controllers may do both at once).
    pub fn expect(&self, owner: &str, creations: usize, uids: impl IntoIterator<Item = String>) {
        self.set(owner, creations as i64, uids.into_iter().collect());
    }

    fn set(&self, owner: &str, creations: i64, deletions: HashSet<String>) {
        let expected = Expected {
            creations,
            deletions,
            since: Instant::now(),
        };
        self.owners.lock().insert(owner.to_string(), expected);
    }

    /// The watch showed a pod of `owner` created (or a creation will not
    /// happen: it failed or was skipped).
    pub fn creation_observed(&self, owner: &str) {
        self.lower_creations(owner, 1);
    }

    /// `count` expected creations will not happen (they were skipped
    /// after an earlier batch failed).
    pub fn lower_creations(&self, owner: &str, count: usize) {
        if let Some(expected) = self.owners.lock().get_mut(owner) {
            expected.creations -= count as i64;
        }
    }

    /// The watch showed the pod with `uid` deleted (or its deletion failed
    /// and will not be seen).
    pub fn deletion_observed(&self, owner: &str, uid: &str) {
        if let Some(expected) = self.owners.lock().get_mut(owner) {
            expected.deletions.remove(uid);
        }
    }

    /// Forgets the owner (it was deleted).
    pub fn forget(&self, owner: &str) {
        self.owners.lock().remove(owner);
    }

    /// Creations and deletions still pending for `owner`, for logs and tests.
    pub fn pending(&self, owner: &str) -> (i64, usize) {
        match self.owners.lock().get(owner) {
            None => (0, 0),
            Some(e) => (e.creations.max(0), e.deletions.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_hold_the_owner_until_each_is_observed() {
        let expectations = Expectations::new();
        assert!(expectations.satisfied("ns/rs"));
        expectations.expect_creations("ns/rs", 2);
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
        // More events than expected (another writer's pods) do no harm.
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
    }

    #[test]
    fn deletions_are_tracked_by_uid() {
        let expectations = Expectations::new();
        expectations.expect_deletions("ns/rs", ["a".to_string(), "b".to_string()]);
        expectations.deletion_observed("ns/rs", "a");
        expectations.deletion_observed("ns/rs", "a");
        assert!(!expectations.satisfied("ns/rs"));
        assert_eq!(expectations.pending("ns/rs"), (0, 1));
        expectations.deletion_observed("ns/rs", "b");
        assert!(expectations.satisfied("ns/rs"));
    }

    #[tokio::test(start_paused = true)]
    async fn expectations_expire_after_five_minutes() {
        let expectations = Expectations::new();
        expectations.expect_creations("ns/rs", 3);
        tokio::time::advance(EXPECTATIONS_TIMEOUT - Duration::from_secs(1)).await;
        assert!(!expectations.satisfied("ns/rs"));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(expectations.satisfied("ns/rs"));
    }

    #[test]
    fn lowering_and_forgetting() {
        let expectations = Expectations::new();
        expectations.expect_creations("ns/rs", 4);
        expectations.lower_creations("ns/rs", 4);
        assert!(expectations.satisfied("ns/rs"));
        expectations.expect_creations("ns/rs", 1);
        expectations.forget("ns/rs");
        assert!(expectations.satisfied("ns/rs"));
    }
}
