//! Leases left to expire while faults happen: short leases are granted
//! one after another, each with a key attached and never kept alive, and
//! each key is read until it is gone. Two guarantees are checked, neither
//! by a clock other than the test's own monotonic one:
//! - never early: a key found gone by a read that returned before the
//!   lease's TTL had passed since its grant was *sent* expired early (the
//!   leader's TTL can only start after the grant arrives), whatever the
//!   machine's load;
//! - always eventually: once the faults stop, every such key goes within
//!   a generous bound (a lease that never expires leaks its keys forever).
//!
//! The keys live under their own prefix, outside the history's, so the
//! linearizability and watch checks do not see these deletions by expiry;
//! `check_events` holds the whole-keyspace watch to them instead: every
//! acknowledged put at its revision, every expiry a deletion event, and
//! nothing under the prefix that this task did not write.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, GetOptions, PutOptions};

use crate::checker::watch::{Event, Kind};
use crate::history::Recorder;
use crate::history_etcd::{connect, Traffic};

pub const EXPIRY_PREFIX: &str = "lease-expiry/";
/// Asked for; the store may grant more (etcd raises TTLs below its minimum).
const TTL: i64 = 2;
/// At most this many leases waiting to expire at once.
const OUTSTANDING: usize = 4;
const PERIOD: Duration = Duration::from_millis(250);

/// A lease whose key was acknowledged and has not yet been seen gone.
struct Waiting {
    key: String,
    /// When the grant was sent, in the recorder's clock (ns).
    granted_at: u64,
    ttl: Duration,
}

/// What the expiring leases showed.
#[derive(Default)]
pub struct Expiries {
    waiting: Mutex<Vec<Waiting>>,
    /// Every key a put was sent for.
    sent: Mutex<HashSet<String>>,
    /// Acknowledged puts: key and revision.
    acked: Mutex<Vec<(String, i64)>>,
    /// Keys seen gone.
    gone: Mutex<Vec<String>>,
    pub expired: Mutex<usize>,
    /// Seen gone after the TTL: the longest delay past it.
    pub latest: Mutex<Duration>,
    pub violations: Mutex<Vec<String>>,
}

impl Expiries {
    /// Grants and watches leases until `traffic.stop`.
    pub async fn run(self: Arc<Self>, traffic: Arc<Traffic>) {
        let mut sequence = 0;
        let mut etcd: Option<Client> = None;
        while !traffic.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(PERIOD).await;
            if etcd.is_none() {
                let urls = traffic.urls.lock().unwrap().clone();
                etcd = connect(&urls).await;
            }
            let Some(client) = etcd.as_mut() else {
                continue;
            };
            if !self.look(client, &traffic.recorder).await {
                etcd = None; // try the members afresh
                continue;
            }
            if self.waiting.lock().unwrap().len() < OUTSTANDING {
                sequence += 1;
                self.grant(client, &traffic.recorder, sequence).await;
            }
        }
    }

    /// After the faults: every lease still waiting must expire within
    /// `bound` (a guard against a lease that never expires, not a timing).
    pub async fn finish(&self, urls: &[String], recorder: &Recorder, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        while !self.waiting.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
            if let Some(mut etcd) = connect(urls).await {
                let _ = self.look(&mut etcd, recorder).await;
            }
            tokio::time::sleep(PERIOD).await;
        }
        let left: Vec<String> = self
            .waiting
            .lock()
            .unwrap()
            .iter()
            .map(|w| w.key.clone())
            .collect();
        if !left.is_empty() {
            let violation =
                format!("leases never expired within {bound:?} after the faults: {left:?}");
            self.violations.lock().unwrap().push(violation);
        }
    }

    /// Grants a lease and attaches a new key; only an acknowledged put is
    /// followed (an ambiguous one may never have written the key).
    async fn grant(&self, etcd: &mut Client, recorder: &Recorder, sequence: usize) {
        let granted_at = recorder.now();
        let Ok(grant) = etcd.lease_grant(TTL, None).await else {
            return;
        };
        let key = format!("{EXPIRY_PREFIX}{sequence}");
        let options = PutOptions::new().with_lease(grant.id());
        self.sent.lock().unwrap().insert(key.clone());
        if let Ok(put) = etcd.put(key.as_str(), "expires", Some(options)).await {
            let revision = put.header().map_or(0, |h| h.revision());
            self.acked.lock().unwrap().push((key.clone(), revision));
            let ttl = Duration::from_secs(grant.ttl().max(TTL) as u64);
            let waiting = Waiting {
                key,
                granted_at,
                ttl,
            };
            self.waiting.lock().unwrap().push(waiting);
        }
    }

    /// Reads each waiting key linearizably; a key gone is checked against
    /// its lease's TTL and stops waiting. False if a read failed.
    async fn look(&self, etcd: &mut Client, recorder: &Recorder) -> bool {
        let keys: Vec<String> = self
            .waiting
            .lock()
            .unwrap()
            .iter()
            .map(|w| w.key.clone())
            .collect();
        for key in keys {
            let read = etcd
                .get(key.as_str(), Some(GetOptions::new().with_count_only()))
                .await;
            let returned = recorder.now();
            match read {
                Ok(response) if response.count() == 0 => self.gone(&key, returned),
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        true
    }

    fn gone(&self, key: &str, returned: u64) {
        let mut waiting = self.waiting.lock().unwrap();
        let Some(at) = waiting.iter().position(|w| w.key == key) else {
            return;
        };
        let lease = waiting.remove(at);
        self.gone.lock().unwrap().push(key.to_string());
        let due = lease.granted_at + lease.ttl.as_nanos() as u64;
        *self.expired.lock().unwrap() += 1;
        if returned < due {
            let early = Duration::from_nanos(due - returned);
            let violation = format!(
                "lease of {key} (TTL {:?}) expired at least {early:?} early",
                lease.ttl
            );
            self.violations.lock().unwrap().push(violation);
        } else {
            let late = Duration::from_nanos(returned - due);
            let mut latest = self.latest.lock().unwrap();
            *latest = (*latest).max(late);
        }
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        format!(
            "expiring leases: {} expired; seen gone at most {:?} after their TTL",
            self.expired.lock().unwrap(),
            self.latest.lock().unwrap()
        )
    }

    /// What a watch of the whole keyspace over `(after, until]` shows
    /// against what this task did: its violations.
    pub fn check_events(&self, events: &[Event], after: i64, until: i64) -> Vec<String> {
        let mine: Vec<&Event> = events
            .iter()
            .filter(|e| e.key.starts_with(EXPIRY_PREFIX))
            .collect();
        let mut violations = Vec::new();
        let sent = self.sent.lock().unwrap();
        if let Some(e) = mine.iter().find(|e| !sent.contains(&e.key)) {
            violations.push(format!(
                "{} at revision {}: a key no lease put wrote",
                e.key, e.revision
            ));
        }
        let at = |key: &str, revision: i64, kind: Kind| {
            mine.iter()
                .any(|e| e.key == key && e.kind == kind && e.revision == revision)
        };
        for (key, revision) in self.acked.lock().unwrap().iter() {
            if *revision > after && *revision <= until && !at(key, *revision, Kind::Put) {
                violations.push(format!(
                    "acknowledged put of {key} at {revision} never delivered"
                ));
            }
        }
        let deleted = |key: &str| mine.iter().any(|e| e.key == key && e.kind == Kind::Delete);
        for key in self.gone.lock().unwrap().iter() {
            if !deleted(key) {
                violations.push(format!("{key} expired but no deletion was delivered"));
            }
        }
        violations
    }
}
