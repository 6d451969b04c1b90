//! The lease table and its clock.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::error::{Result, StoreError};

/// etcd's cap on a lease's TTL, in seconds.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

/// How long to wait before proposing the revoke of an expired lease again,
/// if the first proposal did not take effect.
const REVOKE_RETRY: Duration = Duration::from_secs(3);

#[derive(Debug)]
struct Lease {
    ttl: i64,
    deadline: Instant,
    keys: BTreeSet<Vec<u8>>,
}

/// What `time-to-live` reports about one lease.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseInfo {
    pub remaining: i64,
    pub granted: i64,
    pub keys: Vec<Vec<u8>>,
}

#[derive(Debug)]
pub struct Lessor {
    leases: HashMap<i64, Lease>,
    min_ttl: i64,
    /// True on the leader: only the primary expires leases.
    primary: bool,
}

impl Lessor {
    pub fn new(min_ttl: i64) -> Self {
        Lessor {
            leases: HashMap::new(),
            min_ttl,
            primary: false,
        }
    }

    /// Forgets every lease (before a snapshot restores them).
    pub fn clear(&mut self) {
        self.leases.clear();
    }

    pub fn exists(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    /// The TTL a grant of `ttl` seconds really gets.
    pub fn effective_ttl(&self, ttl: i64) -> i64 {
        ttl.max(self.min_ttl)
    }

    /// Adds a lease; its clock starts now. Returns the effective TTL.
    pub fn grant(&mut self, id: i64, ttl: i64) -> Result<i64> {
        if self.leases.contains_key(&id) {
            return Err(StoreError::LeaseExists);
        }
        if ttl > MAX_LEASE_TTL {
            return Err(StoreError::LeaseTtlTooLarge);
        }
        let ttl = self.effective_ttl(ttl);
        self.insert(id, ttl);
        Ok(ttl)
    }

    /// Re-creates a lease read back from disk at start-up.
    pub fn restore(&mut self, id: i64, ttl: i64) {
        self.insert(id, ttl);
    }

    fn insert(&mut self, id: i64, ttl: i64) {
        let lease = Lease {
            ttl,
            deadline: deadline_after(ttl),
            keys: BTreeSet::new(),
        };
        self.leases.insert(id, lease);
    }

    /// Removes a lease, returning the keys attached to it (to be deleted).
    pub fn revoke(&mut self, id: i64) -> Result<Vec<Vec<u8>>> {
        let lease = self.leases.remove(&id).ok_or(StoreError::LeaseNotFound)?;
        Ok(lease.keys.into_iter().collect())
    }

    pub fn attach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.insert(key.to_vec());
        }
    }

    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.remove(key);
        }
    }

    /// Restarts a lease's clock (a keep-alive). Returns its TTL.
    pub fn renew(&mut self, id: i64) -> Result<i64> {
        let lease = self.leases.get_mut(&id).ok_or(StoreError::LeaseNotFound)?;
        lease.deadline = deadline_after(lease.ttl);
        Ok(lease.ttl)
    }

    pub fn info(&self, id: i64, now: Instant) -> Option<LeaseInfo> {
        let lease = self.leases.get(&id)?;
        let remaining = lease.deadline.saturating_duration_since(now);
        Some(LeaseInfo {
            remaining: remaining.as_secs_f64().ceil() as i64,
            granted: lease.ttl,
            keys: lease.keys.iter().cloned().collect(),
        })
    }

    /// The keys attached to a lease (none if it does not exist).
    pub fn keys(&self, id: i64) -> impl Iterator<Item = &[u8]> {
        self.leases
            .get(&id)
            .into_iter()
            .flat_map(|lease| lease.keys.iter().map(Vec::as_slice))
    }

    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.leases.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Called when this member becomes leader: every lease gets its full TTL
    /// plus `extension` from now, so none expires early because the previous
    /// leader's clock was lost.
    pub fn promote(&mut self, extension: Duration) {
        self.primary = true;
        for lease in self.leases.values_mut() {
            lease.deadline = deadline_after(lease.ttl) + extension;
        }
    }

    pub fn demote(&mut self) {
        self.primary = false;
    }

    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// Leases past their deadline, for the leader to revoke through raft.
    /// Each is pushed back by a retry interval so it is proposed once.
    pub fn take_expired(&mut self, now: Instant, max: usize) -> Vec<i64> {
        if !self.primary {
            return Vec::new();
        }
        let mut expired = Vec::new();
        for (id, lease) in self.leases.iter_mut() {
            if expired.len() >= max {
                break;
            }
            if lease.deadline <= now {
                lease.deadline = now + REVOKE_RETRY;
                expired.push(*id);
            }
        }
        expired
    }
}

fn deadline_after(ttl: i64) -> Instant {
    // Clamp so a huge TTL cannot overflow Instant.
    let secs = ttl.clamp(0, 100 * 365 * 24 * 3600) as u64;
    Instant::now() + Duration::from_secs(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_raises_small_ttls_and_refuses_duplicates() {
        let mut lessor = Lessor::new(2);
        assert_eq!(lessor.grant(1, 1).unwrap(), 2);
        assert_eq!(lessor.grant(1, 5).unwrap_err(), StoreError::LeaseExists);
        assert_eq!(
            lessor.grant(2, MAX_LEASE_TTL + 1).unwrap_err(),
            StoreError::LeaseTtlTooLarge
        );
    }

    #[test]
    fn revoke_returns_attached_keys() {
        let mut lessor = Lessor::new(2);
        lessor.grant(7, 10).unwrap();
        lessor.attach(7, b"a");
        lessor.attach(7, b"b");
        lessor.detach(7, b"a");
        assert_eq!(lessor.revoke(7).unwrap(), vec![b"b".to_vec()]);
        assert_eq!(lessor.revoke(7).unwrap_err(), StoreError::LeaseNotFound);
    }

    #[test]
    fn only_the_primary_expires_and_only_once() {
        let mut lessor = Lessor::new(1);
        lessor.grant(1, 1).unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        assert!(lessor.take_expired(later, 10).is_empty());
        lessor.promote(Duration::ZERO);
        assert_eq!(lessor.take_expired(later, 10), vec![1]);
        assert!(lessor.take_expired(later, 10).is_empty());
    }

    #[test]
    fn renew_restarts_the_clock() {
        let mut lessor = Lessor::new(1);
        lessor.grant(1, 60).unwrap();
        assert_eq!(lessor.renew(1).unwrap(), 60);
        let info = lessor.info(1, Instant::now()).unwrap();
        assert!(info.remaining > 55 && info.granted == 60);
        assert_eq!(lessor.renew(2).unwrap_err(), StoreError::LeaseNotFound);
    }
}
