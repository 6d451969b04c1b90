//! Leases: time-to-live handles that keys can be attached to.
//!
//! Grants and revokes are raft entries applied on every member; the clock runs
//! only on the leader (the primary lessor), which proposes a revoke through
//! raft when a lease expires, so every member deletes the same keys at the
//! same revision. Keep-alives renew the leader's in-memory deadline only.

mod lessor;

pub use lessor::{LeaseInfo, Lessor, MAX_LEASE_TTL};
