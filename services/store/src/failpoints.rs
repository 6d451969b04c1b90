//! Fault injection for the fault suites, off unless the member was started
//! with `--experimental-enable-failpoints`.
//!
//! - `raft-log-sync-delay`, a slow disk. Every raft log sync (the
//!   fdatasync behind every acknowledgement) waits the set number of
//!   milliseconds before it starts. Changing the delay wakes waiting syncs,
//!   so removing a huge delay lets them finish at once. Nothing is skipped:
//!   the sync still happens, only later.
//! - `put-error-every`, a deliberately broken server for the fault suites
//!   to catch: every Nth put this member answers is applied, then answered
//!   with `Internal` as if it had failed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

#[derive(Debug, Default)]
struct SyncDelay {
    millis: u64,
    /// Syncs waiting on the delay right now.
    waiting: u64,
}

#[derive(Debug, Default)]
pub struct Failpoints {
    sync_delay: Mutex<SyncDelay>,
    changed: Condvar,
    /// N of `put-error-every` (0: off), and the puts answered so far.
    put_error_every: AtomicU64,
    puts: AtomicU64,
}

/// What `GET /debug/failpoints/raft-log-sync-delay` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncDelayState {
    pub millis: u64,
    pub waiting: u64,
}

impl Failpoints {
    /// Sets the delay of every raft log sync from now on (0: none); syncs
    /// already waiting measure their wait against the new value.
    pub fn set_sync_delay(&self, millis: u64) {
        self.sync_delay.lock().millis = millis;
        self.changed.notify_all();
    }

    pub fn sync_delay(&self) -> SyncDelayState {
        let delay = self.sync_delay.lock();
        SyncDelayState {
            millis: delay.millis,
            waiting: delay.waiting,
        }
    }

    /// Answers every `n`th put from now on with an error after applying it
    /// (0: none).
    pub fn set_put_error_every(&self, n: u64) {
        self.puts.store(0, Ordering::Relaxed);
        self.put_error_every.store(n, Ordering::Relaxed);
    }

    pub fn put_error_every(&self) -> u64 {
        self.put_error_every.load(Ordering::Relaxed)
    }

    /// Called once a put is applied: whether to answer it with an error.
    pub fn fails_applied_put(&self) -> bool {
        let every = self.put_error_every();
        every > 0 && (self.puts.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every)
    }

    /// Called before each raft log sync: returns once the sync has waited
    /// the delay in force (which may change meanwhile).
    pub fn before_log_sync(&self) {
        let started = Instant::now();
        let mut delay = self.sync_delay.lock();
        if delay.millis == 0 {
            return;
        }
        delay.waiting += 1;
        loop {
            let due = started + Duration::from_millis(delay.millis);
            let now = Instant::now();
            if now >= due {
                break;
            }
            self.changed.wait_for(&mut delay, due - now);
        }
        delay.waiting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn every_nth_applied_put_fails_once_set() {
        let failpoints = Failpoints::default();
        assert!(!(0..20).any(|_| failpoints.fails_applied_put()));
        failpoints.set_put_error_every(10);
        let failed: Vec<usize> = (1..=30)
            .filter(|_| failpoints.fails_applied_put())
            .collect();
        assert_eq!(failed, vec![10, 20, 30]);
    }

    #[test]
    fn no_delay_returns_at_once() {
        let failpoints = Failpoints::default();
        failpoints.before_log_sync();
        assert_eq!(failpoints.sync_delay().waiting, 0);
    }

    #[test]
    fn a_waiting_sync_is_released_when_the_delay_is_removed() {
        let failpoints = Arc::new(Failpoints::default());
        failpoints.set_sync_delay(3_600_000);
        let syncing = {
            let failpoints = failpoints.clone();
            std::thread::spawn(move || failpoints.before_log_sync())
        };
        while failpoints.sync_delay().waiting == 0 {
            std::thread::yield_now();
        }
        assert!(!syncing.is_finished());
        failpoints.set_sync_delay(0);
        syncing.join().unwrap();
        assert_eq!(
            failpoints.sync_delay(),
            SyncDelayState {
                millis: 0,
                waiting: 0
            }
        );
    }
}
