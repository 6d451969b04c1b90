//! A pod waiting in the scheduling queue, and the order of each sub-queue.

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::PodInfo;

#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    pub pod: Arc<PodInfo>,
    /// When the pod last entered the queue (activeQ order among equal priorities).
    pub timestamp: Instant,
    /// Scheduling attempts so far (backoff doubles with each).
    pub attempts: u32,
    pub initial_attempt: Option<Instant>,
    /// Plugins that rejected the pod in its last attempt.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// The cluster events those plugins registered: what may help it.
    pub waiting_for: Vec<crate::framework::ClusterEvent>,
    /// Kept out of the activeQ by a PreEnqueue plugin (scheduling gates).
    pub gated: bool,
    /// A tie-breaker among pods with the same timestamp, and identity of the entry.
    pub sequence: u64,
}

impl QueuedPodInfo {
    pub fn new(pod: Arc<PodInfo>, now: Instant, sequence: u64) -> QueuedPodInfo {
        QueuedPodInfo {
            pod,
            timestamp: now,
            attempts: 0,
            initial_attempt: None,
            unschedulable_plugins: BTreeSet::new(),
            waiting_for: Vec::new(),
            gated: false,
            sequence,
        }
    }

    /// kube's backoff: initial * 2^(attempts-1), at most `max`.
    pub fn backoff_duration(&self, initial: Duration, max: Duration) -> Duration {
        let mut duration = initial;
        for _ in 1..self.attempts {
            duration = duration.saturating_mul(2);
            if duration > max {
                return max;
            }
        }
        duration.min(max)
    }

    pub fn backoff_expiry(&self, initial: Duration, max: Duration) -> Instant {
        self.timestamp + self.backoff_duration(initial, max)
    }
}

/// activeQ order: higher priority first, then earlier timestamp (PrioritySort).
pub type ActiveKey = (Reverse<i32>, Instant, u64);
/// backoffQ order: earlier expiry first.
pub type BackoffKey = (Instant, u64);

/// Where a queued pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Active(ActiveKey),
    Backoff(BackoffKey),
    Unschedulable,
}

pub fn active_key(info: &QueuedPodInfo) -> ActiveKey {
    (Reverse(info.pod.priority), info.timestamp, info.sequence)
}
