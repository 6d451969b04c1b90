//! The leader-election decision, free of I/O: given the Lease as read and
//! when this process last saw it change, may we take or keep it, and
//! what do we write? client-go's `tryAcquireOrRenew` rules.
//!
//! Expiry is judged on this process's monotonic clock from the moment it
//! *observed* the record change, never from the holder's `renewTime`, so
//! clocks on different machines need not agree.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::chrono::{DateTime, Utc};
use tokio::time::Instant;

/// The fields of a Lease that leader election reads and writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    /// Who holds it; empty when released.
    pub holder: String,
    /// How long a holder's claim lasts after it was seen renewed, seconds.
    pub lease_duration_seconds: i32,
    /// When the current holder took it.
    pub acquire_time: Option<DateTime<Utc>>,
    /// When the holder last renewed it.
    pub renew_time: Option<DateTime<Utc>>,
    /// How many times it changed hands.
    pub transitions: i32,
}

impl Record {
    /// The record in a Lease's spec.
    pub fn from_spec(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// The record as a Lease's spec.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }
}

/// What this process last saw of the Lease, and when (monotonic).
#[derive(Clone, Debug)]
pub struct Observed {
    /// The record as last read or written.
    pub record: Record,
    /// When it was first seen in that state.
    pub at: Instant,
}

impl Observed {
    /// Notes a freshly read record: the clock restarts only if it changed.
    pub fn saw(previous: Option<&Observed>, record: Record, now: Instant) -> Observed {
        match previous {
            Some(seen) if seen.record == record => seen.clone(),
            _ => Observed { record, at: now },
        }
    }

    /// Whether someone else holds it and their claim has not lapsed.
    pub fn held_by_other(&self, me: &str, lease_duration: Duration, now: Instant) -> bool {
        !self.record.holder.is_empty() && self.record.holder != me && self.at + lease_duration > now
    }
}

/// The record of a Lease this process creates: no transition yet.
pub fn first(me: &str, lease_duration: Duration, now: DateTime<Utc>) -> Record {
    Record {
        holder: me.to_string(),
        lease_duration_seconds: seconds(lease_duration),
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions: 0,
    }
}

/// The record to write to take or keep an existing lease.
pub fn claim(current: &Record, me: &str, lease_duration: Duration, now: DateTime<Utc>) -> Record {
    let renewing = current.holder == me;
    Record {
        holder: me.to_string(),
        lease_duration_seconds: seconds(lease_duration),
        acquire_time: if renewing {
            current.acquire_time
        } else {
            Some(now)
        },
        renew_time: Some(now),
        transitions: if renewing {
            current.transitions
        } else {
            current.transitions + 1
        },
    }
}

/// The record that gives the lease up: no holder, one second left, so
/// the next candidate takes it at its next try.
pub fn release(current: &Record, now: DateTime<Utc>) -> Record {
    Record {
        holder: String::new(),
        lease_duration_seconds: 1,
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions: current.transitions,
    }
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn held_by(holder: &str, transitions: i32) -> Record {
        Record {
            holder: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some(Utc::now()),
            renew_time: Some(Utc::now()),
            transitions,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn another_holders_claim_lapses_a_lease_duration_after_it_was_last_seen_renewed() {
        let start = Instant::now();
        let seen = Observed::saw(None, held_by("a", 0), start);
        assert!(seen.held_by_other("b", LEASE, start + Duration::from_secs(14)));
        assert!(!seen.held_by_other("b", LEASE, start + Duration::from_secs(15)));
        // A renewal seen at 10 s restarts the clock...
        let mut renewed = held_by("a", 0);
        renewed.renew_time = Some(Utc::now() + k8s_openapi::chrono::Duration::seconds(10));
        let seen = Observed::saw(Some(&seen), renewed, start + Duration::from_secs(10));
        assert!(seen.held_by_other("b", LEASE, start + Duration::from_secs(24)));
        // ...but reading the same record again does not.
        let again = Observed::saw(
            Some(&seen),
            seen.record.clone(),
            start + Duration::from_secs(20),
        );
        assert_eq!(again.at, start + Duration::from_secs(10));
        // Our own claim never blocks us.
        assert!(!seen.held_by_other("a", LEASE, start));
    }

    #[test]
    fn taking_over_counts_a_transition_renewing_does_not() {
        let now = Utc::now();
        let taken = claim(&held_by("a", 3), "b", LEASE, now);
        assert_eq!((taken.holder.as_str(), taken.transitions), ("b", 4));
        assert_eq!(taken.acquire_time, Some(now));
        let renewed = claim(
            &taken,
            "b",
            LEASE,
            now + k8s_openapi::chrono::Duration::seconds(2),
        );
        assert_eq!(renewed.transitions, 4);
        assert_eq!(renewed.acquire_time, Some(now));
        assert_eq!(renewed.lease_duration_seconds, 15);
        // The first holder of a new Lease is no transition.
        assert_eq!(first("a", LEASE, now).transitions, 0);
    }

    #[test]
    fn release_leaves_no_holder_and_keeps_the_count() {
        let released = release(&held_by("a", 2), Utc::now());
        assert_eq!(released.holder, "");
        assert_eq!(released.transitions, 2);
        assert_eq!(released.lease_duration_seconds, 1);
        // Taking a released lease is a transition.
        assert_eq!(claim(&released, "b", LEASE, Utc::now()).transitions, 3);
    }
}
