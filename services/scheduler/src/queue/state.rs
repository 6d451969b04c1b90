//! The queue's state under its lock: where each pod is, and the moves
//! between the sub-queues.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use super::nominator::Nominator;
use super::queued::{active_key, Location, QueuedPodInfo};
use super::{PendingCounts, QueueHooks, QueueSettings};
use crate::framework::{ActionType, ClusterEvent, EventResource};
use crate::model::PodInfo;

pub(super) struct QueueState {
    settings: QueueSettings,
    hooks: Arc<dyn QueueHooks>,
    pods: HashMap<String, (Location, QueuedPodInfo)>,
    active: BTreeSet<super::queued::ActiveKey>,
    active_keys: HashMap<u64, String>,
    backoff: BTreeSet<super::queued::BackoffKey>,
    backoff_keys: HashMap<u64, String>,
    /// Pods popped and not yet done: the events that arrived meanwhile.
    in_flight: HashMap<String, Vec<ClusterEvent>>,
    /// The newest version of an in-flight pod that was updated meanwhile.
    in_flight_updates: HashMap<String, Arc<PodInfo>>,
    pub(super) nominator: Nominator,
    pub(super) scheduling_cycle: u64,
    pub(super) closed: bool,
    sequence: u64,
    last_unschedulable_flush: Instant,
}

impl QueueState {
    pub(super) fn new(
        settings: QueueSettings,
        hooks: Arc<dyn QueueHooks>,
        now: Instant,
    ) -> QueueState {
        QueueState {
            settings,
            hooks,
            pods: HashMap::new(),
            active: BTreeSet::new(),
            active_keys: HashMap::new(),
            backoff: BTreeSet::new(),
            backoff_keys: HashMap::new(),
            in_flight: HashMap::new(),
            in_flight_updates: HashMap::new(),
            nominator: Nominator::default(),
            scheduling_cycle: 0,
            closed: false,
            sequence: 0,
            last_unschedulable_flush: now,
        }
    }

    pub(super) fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    fn next_sequence(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// Takes the pod out of whichever sub-queue holds it.
    fn take(&mut self, key: &str) -> Option<QueuedPodInfo> {
        let (location, info) = self.pods.remove(key)?;
        match location {
            Location::Active(order) => {
                self.active.remove(&order);
                self.active_keys.remove(&order.2);
            }
            Location::Backoff(order) => {
                self.backoff.remove(&order);
                self.backoff_keys.remove(&order.1);
            }
            Location::Unschedulable => {}
        }
        Some(info)
    }

    fn put_active(&mut self, info: QueuedPodInfo) {
        let order = active_key(&info);
        self.active.insert(order);
        self.active_keys.insert(order.2, info.pod.key.clone());
        self.pods
            .insert(info.pod.key.clone(), (Location::Active(order), info));
    }

    fn put_backoff(&mut self, info: QueuedPodInfo) {
        let order = (
            info.backoff_expiry(self.settings.initial_backoff, self.settings.max_backoff),
            info.sequence,
        );
        self.backoff.insert(order);
        self.backoff_keys.insert(order.1, info.pod.key.clone());
        self.pods
            .insert(info.pod.key.clone(), (Location::Backoff(order), info));
    }

    fn put_unschedulable(&mut self, info: QueuedPodInfo) {
        self.pods
            .insert(info.pod.key.clone(), (Location::Unschedulable, info));
    }

    /// Into the activeQ if PreEnqueue allows, else waiting gated.
    fn enqueue(&mut self, mut info: QueuedPodInfo) {
        if self.hooks.pre_enqueue(&info.pod).is_success() {
            info.gated = false;
            self.put_active(info);
        } else {
            info.gated = true;
            self.put_unschedulable(info);
        }
    }

    fn backing_off(&self, info: &QueuedPodInfo, now: Instant) -> bool {
        info.attempts > 0
            && info.backoff_expiry(self.settings.initial_backoff, self.settings.max_backoff) > now
    }

    /// To the backoffQ while its backoff lasts, else to the activeQ.
    fn requeue(&mut self, info: QueuedPodInfo, now: Instant) {
        if self.backing_off(&info, now) {
            self.put_backoff(info);
        } else {
            self.enqueue(info);
        }
    }

    pub(super) fn add(&mut self, pod: Arc<PodInfo>, now: Instant) {
        if self.pods.contains_key(&pod.key) || self.in_flight.contains_key(&pod.key) {
            return;
        }
        let sequence = self.next_sequence();
        self.enqueue(QueuedPodInfo::new(pod, now, sequence));
    }

    pub(super) fn update(&mut self, old: &PodInfo, pod: Arc<PodInfo>, now: Instant) {
        let key = pod.key.clone();
        if let Some(events) = self.in_flight.get_mut(&key) {
            events.push(pod_update_event(old, &pod));
            self.in_flight_updates.insert(key, pod);
            return;
        }
        let Some(location) = self.pods.get(&key).map(|(location, _)| *location) else {
            self.add(pod, now);
            return;
        };
        let mut info = self.take(&key).expect("present");
        let changed_spec = spec_or_labels_changed(old, &pod);
        info.pod = pod;
        match location {
            Location::Active(_) => self.enqueue(info),
            Location::Backoff(_) => self.requeue(info, now),
            Location::Unschedulable if info.gated || changed_spec => {
                // A change that may help: PreEnqueue again, or retry after backoff.
                info.unschedulable_plugins.clear();
                info.waiting_for.clear();
                self.requeue(info, now);
            }
            Location::Unschedulable => self.put_unschedulable(info),
        }
    }

    pub(super) fn delete(&mut self, key: &str) {
        self.take(key);
        self.in_flight.remove(key);
        self.in_flight_updates.remove(key);
        self.nominator.remove(key);
    }

    pub(super) fn pop(&mut self, now: Instant) -> Option<QueuedPodInfo> {
        let order = self.active.pop_first()?;
        let key = self.active_keys.remove(&order.2).expect("indexed");
        let (_, mut info) = self.pods.remove(&key).expect("indexed");
        info.attempts += 1;
        info.initial_attempt.get_or_insert(now);
        info.unschedulable_plugins.clear();
        info.waiting_for.clear();
        self.scheduling_cycle += 1;
        self.in_flight.insert(key, Vec::new());
        Some(info)
    }

    pub(super) fn done(&mut self, key: &str) {
        self.in_flight.remove(key);
        self.in_flight_updates.remove(key);
    }

    pub(super) fn add_unschedulable(
        &mut self,
        mut info: QueuedPodInfo,
        errored: bool,
        now: Instant,
    ) {
        let key = info.pod.key.clone();
        let events = self.in_flight.remove(&key).unwrap_or_default();
        if let Some(newer) = self.in_flight_updates.remove(&key) {
            info.pod = newer;
        }
        if self.pods.contains_key(&key) {
            return;
        }
        info.timestamp = now;
        info.sequence = self.next_sequence();
        info.waiting_for = self
            .hooks
            .events_for(&info.pod, &info.unschedulable_plugins);
        let helped = events
            .iter()
            .any(|e| info.waiting_for.iter().any(|r| r.matches(e)));
        if errored || info.unschedulable_plugins.is_empty() || helped {
            self.put_backoff_or_active(info, now);
        } else {
            self.put_unschedulable(info);
        }
    }

    fn put_backoff_or_active(&mut self, info: QueuedPodInfo, now: Instant) {
        if self.backing_off(&info, now) {
            self.put_backoff(info);
        } else {
            self.put_active(info);
        }
    }

    /// Moves the unschedulable pods that `event` may help (and that `wanted` picks).
    pub(super) fn move_all(
        &mut self,
        event: ClusterEvent,
        now: Instant,
        wanted: impl Fn(&QueuedPodInfo) -> bool,
    ) {
        for events in self.in_flight.values_mut() {
            events.push(event);
        }
        let timed_out = event == ClusterEvent::UNSCHEDULABLE_TIMEOUT;
        let candidates: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, (location, info))| {
                *location == Location::Unschedulable
                    && !info.gated
                    && (timed_out || info.waiting_for.iter().any(|r| r.matches(&event)))
                    && wanted(info)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in candidates {
            let info = self.take(&key).expect("present");
            self.put_backoff_or_active(info, now);
        }
    }

    pub(super) fn assigned_pod_added(&mut self, pod: &PodInfo, now: Instant) {
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD);
        self.move_all(event, now, |waiting| selects(&waiting.pod, pod));
    }

    /// Backoff completions to the activeQ; long-unschedulable pods retried.
    pub(super) fn flush(&mut self, now: Instant) {
        while let Some(first) = self.backoff.first().copied() {
            if first.0 > now {
                break;
            }
            self.backoff.pop_first();
            let key = self.backoff_keys.remove(&first.1).expect("indexed");
            let (_, info) = self.pods.remove(&key).expect("indexed");
            self.enqueue(info);
        }
        if now.saturating_duration_since(self.last_unschedulable_flush)
            >= self.settings.unschedulable_flush_interval
        {
            self.last_unschedulable_flush = now;
            let max = self.settings.max_unschedulable;
            self.move_all(ClusterEvent::UNSCHEDULABLE_TIMEOUT, now, |info| {
                now.saturating_duration_since(info.timestamp) >= max
            });
        }
    }

    /// When the queue must look again: the next backoff expiry or flush.
    pub(super) fn next_wake(&self, now: Instant) -> Option<Instant> {
        let flush = self.last_unschedulable_flush + self.settings.unschedulable_flush_interval;
        let backoff = self.backoff.first().map(|b| b.0);
        Some(backoff.map_or(flush, |b| b.min(flush)).max(now))
    }

    pub(super) fn counts(&self) -> PendingCounts {
        let mut counts = PendingCounts {
            active: self.active.len(),
            backoff: self.backoff.len(),
            ..Default::default()
        };
        for (location, info) in self.pods.values() {
            if *location == Location::Unschedulable {
                if info.gated {
                    counts.gated += 1;
                } else {
                    counts.unschedulable += 1;
                }
            }
        }
        counts
    }
}

/// Whether `waiting`'s required affinity or spread constraints could select `bound`.
fn selects(waiting: &PodInfo, bound: &PodInfo) -> bool {
    let empty = crate::model::Labels::new();
    let by_affinity = waiting
        .required_affinity
        .iter()
        .chain(waiting.preferred_affinity.iter().map(|w| &w.term))
        .any(|term| term.matches(&bound.pod, &empty) || term.uses_namespace_selector());
    let by_spread = waiting.namespace() == bound.namespace()
        && !waiting
            .spec()
            .topology_spread_constraints
            .as_deref()
            .unwrap_or_default()
            .is_empty();
    by_affinity || by_spread
}

/// The update event kube would derive from the change.
fn pod_update_event(old: &PodInfo, new: &PodInfo) -> ClusterEvent {
    let mut action = ActionType::UPDATE_OTHER;
    if old.labels() != new.labels() {
        action = action.or(ActionType::UPDATE_POD_LABEL);
    }
    if old.tolerations() != new.tolerations() {
        action = action.or(ActionType::UPDATE_POD_TOLERATION);
    }
    let gated = |p: &PodInfo| {
        !p.spec()
            .scheduling_gates
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    };
    if gated(old) && !gated(new) {
        action = action.or(ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED);
    }
    ClusterEvent::new(EventResource::UnscheduledPod, action)
}

/// Whether anything but status and bookkeeping metadata changed.
fn spec_or_labels_changed(old: &PodInfo, new: &PodInfo) -> bool {
    old.pod.spec != new.pod.spec
        || old.pod.metadata.labels != new.pod.metadata.labels
        || old.pod.metadata.annotations != new.pod.metadata.annotations
}
