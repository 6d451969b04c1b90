//! The scheduling queue (kube's PriorityQueue): the activeQ (by priority,
//! then time), the backoffQ (pods that failed, waiting 1 s doubling to 10 s),
//! and the unschedulable pods, which go back when a cluster event that could
//! help them arrives (an event one of the plugins that rejected them
//! registered), or after 5 minutes. Pods kept out by a PreEnqueue plugin
//! (scheduling gates) wait with the unschedulable ones until updated.

pub mod clock;
pub mod nominator;
pub mod queued;
mod state;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use self::clock::Clock;
use self::nominator::Nominator;
pub use self::queued::QueuedPodInfo;
use self::state::QueueState;
use crate::framework::{ClusterEvent, NominatedPods, Status};
use crate::model::PodInfo;

/// What the queue asks of the pod's profile.
pub trait QueueHooks: Send + Sync {
    /// PreEnqueue: a rejection keeps the pod out of the activeQ.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
    /// The events the given plugins registered, for the pod's profile.
    fn events_for(&self, pod: &PodInfo, plugins: &BTreeSet<&'static str>) -> Vec<ClusterEvent>;
}

#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a pod may stay unschedulable before it is retried anyway.
    pub max_unschedulable: Duration,
    /// How often the unschedulable pods are checked for that.
    pub unschedulable_flush_interval: Duration,
}

impl Default for QueueSettings {
    fn default() -> QueueSettings {
        QueueSettings {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(5 * 60),
            unschedulable_flush_interval: Duration::from_secs(30),
        }
    }
}

/// Pending pods per sub-queue (`scheduler_pending_pods{queue}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingCounts {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

pub struct SchedulingQueue {
    state: Mutex<QueueState>,
    ready: Condvar,
    clock: Arc<dyn Clock>,
}

impl SchedulingQueue {
    pub fn new(
        settings: QueueSettings,
        hooks: Arc<dyn QueueHooks>,
        clock: Arc<dyn Clock>,
    ) -> SchedulingQueue {
        let now = clock.now();
        SchedulingQueue {
            state: Mutex::new(QueueState::new(settings, hooks, now)),
            ready: Condvar::new(),
            clock,
        }
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut QueueState, Instant) -> T) -> T {
        let now = self.clock.now();
        let mut state = self.state.lock();
        let result = f(&mut state, now);
        if state.has_active() {
            self.ready.notify_one();
        }
        result
    }

    /// A new unscheduled pod.
    pub fn add(&self, pod: Arc<PodInfo>) {
        self.with_state(|s, now| s.add(pod, now));
    }

    /// An unscheduled pod changed.
    pub fn update(&self, old: &PodInfo, pod: Arc<PodInfo>) {
        self.with_state(|s, now| s.update(old, pod, now));
    }

    /// An unscheduled pod was deleted (or is now bound, or another scheduler's).
    pub fn delete(&self, key: &str) {
        self.with_state(|s, _| s.delete(key));
    }

    /// The next pod to schedule, waiting for one; None once closed.
    pub fn pop(&self) -> Option<QueuedPodInfo> {
        let mut state = self.state.lock();
        loop {
            let now = self.clock.now();
            state.flush(now);
            if let Some(info) = state.pop(now) {
                return Some(info);
            }
            if state.closed {
                return None;
            }
            let wait = state.next_wake(now).map_or(Duration::from_secs(1), |at| {
                at.saturating_duration_since(now)
            });
            self.ready.wait_for(
                &mut state,
                wait.clamp(Duration::from_millis(1), Duration::from_secs(1)),
            );
        }
    }

    /// The next pod if one is ready now (never waits).
    pub fn try_pop(&self) -> Option<QueuedPodInfo> {
        self.with_state(|s, now| {
            s.flush(now);
            s.pop(now)
        })
    }

    /// A cycle failed with `info.unschedulable_plugins` set: back off, or
    /// wait for a relevant event. `errored` (not a rejection) always backs off.
    pub fn add_unschedulable(&self, info: QueuedPodInfo, errored: bool) {
        self.with_state(|s, now| s.add_unschedulable(info, errored, now));
    }

    /// The pod's cycle ended (it was assumed): stop tracking events for it.
    pub fn done(&self, key: &str) {
        self.with_state(|s, _| s.done(key));
    }

    /// A cluster event: move the unschedulable pods it may help.
    pub fn move_all(&self, event: ClusterEvent) {
        self.with_state(|s, now| s.move_all(event, now, |_| true));
    }

    /// A pod was bound (seen through the watch): pods whose affinity terms or
    /// spread constraints select it may now fit.
    pub fn assigned_pod_added(&self, pod: &PodInfo) {
        self.with_state(|s, now| s.assigned_pod_added(pod, now));
    }

    /// Moves every pod rejected as unschedulable now (kube's flush after 5 minutes, early).
    pub fn flush_unschedulable(&self) {
        self.with_state(|s, now| s.move_all(ClusterEvent::UNSCHEDULABLE_TIMEOUT, now, |_| true));
    }

    pub fn nominate(&self, pod: Arc<PodInfo>, node: &str) {
        self.state.lock().nominator.add(pod, node);
    }

    pub fn clear_nomination(&self, key: &str) {
        self.state.lock().nominator.remove(key);
    }

    pub fn nominated_node(&self, key: &str) -> Option<String> {
        self.state.lock().nominator.node_of(key).map(str::to_string)
    }

    pub fn pending(&self) -> PendingCounts {
        self.state.lock().counts()
    }

    /// The scheduling cycle counter (one per pop).
    pub fn scheduling_cycle(&self) -> u64 {
        self.state.lock().scheduling_cycle
    }

    pub fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_all();
    }
}

impl NominatedPods for SchedulingQueue {
    fn nominated_for(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.state.lock().nominator.nominated_for(node)
    }
}

/// A copy of the nominations for one cycle, so filters do not lock the queue per node.
pub struct NominationsView(Nominator);

impl SchedulingQueue {
    pub fn nominations(&self) -> Option<NominationsView> {
        let state = self.state.lock();
        if state.nominator.is_empty() {
            return None;
        }
        Some(NominationsView(state.nominator.clone()))
    }
}

impl NominatedPods for NominationsView {
    fn nominated_for(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.0.nominated_for(node)
    }
}

#[cfg(test)]
mod tests;
