//! The queue's bookkeeping, free of locks and tasks: which keys wait,
//! which are dirty (to be processed), which are being processed, and the
//! delayed adds ordered by when they are due.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;

use tokio::time::Instant;

/// client-go's `Type` plus the delaying queue's heap, in one place so one
/// lock covers both.
#[derive(Debug)]
pub(super) struct State<T> {
    /// Keys ready to hand out, in order.
    queue: VecDeque<T>,
    /// Keys to be processed (queued, or re-added while processing), with
    /// when they were first added since last taken.
    dirty: HashMap<T, Instant>,
    /// Keys handed to a worker and not yet `done`, with when.
    processing: HashMap<T, Instant>,
    /// Delayed keys: when each is due and the heap entry that counts.
    waiting: HashMap<T, (Instant, u64)>,
    /// (due, sequence) of delayed adds; entries whose sequence no longer
    /// matches `waiting` were superseded by an earlier due time.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    heap_items: HashMap<u64, T>,
    sequence: u64,
    pub(super) shutting_down: bool,
}

impl<T: Clone + Eq + Hash> State<T> {
    pub(super) fn new() -> State<T> {
        State {
            queue: VecDeque::new(),
            dirty: HashMap::new(),
            processing: HashMap::new(),
            waiting: HashMap::new(),
            heap: BinaryHeap::new(),
            heap_items: HashMap::new(),
            sequence: 0,
            shutting_down: false,
        }
    }

    /// Marks `item` to be processed; true if this made a new entry in the
    /// ready queue (so a worker should be woken).
    pub(super) fn add(&mut self, item: T, now: Instant) -> Added {
        if self.dirty.contains_key(&item) {
            return Added::AlreadyQueued;
        }
        self.dirty.insert(item.clone(), now);
        if self.processing.contains_key(&item) {
            return Added::AfterProcessing;
        }
        self.queue.push_back(item);
        Added::Queued
    }

    /// The next ready key, now being processed, and how long it waited.
    pub(super) fn take(&mut self, now: Instant) -> Option<(T, std::time::Duration)> {
        let item = self.queue.pop_front()?;
        let since = self.dirty.remove(&item).unwrap_or(now);
        self.processing.insert(item.clone(), now);
        Some((item, now.saturating_duration_since(since)))
    }

    /// `item`'s processing ended; returns how long it took, and whether
    /// it went back in the ready queue (it was added meanwhile).
    pub(super) fn done(&mut self, item: &T, now: Instant) -> (Option<std::time::Duration>, bool) {
        let started = self.processing.remove(item);
        let worked = started.map(|s| now.saturating_duration_since(s));
        if self.dirty.contains_key(item) {
            self.queue.push_back(item.clone());
            return (worked, true);
        }
        (worked, false)
    }

    /// Schedules `item` for `due`, keeping the earlier time if it is
    /// already waiting. True if this is now the earliest due entry.
    pub(super) fn add_at(&mut self, item: T, due: Instant) -> bool {
        if let Some((current, _)) = self.waiting.get(&item) {
            if *current <= due {
                return false;
            }
        }
        self.sequence += 1;
        let sequence = self.sequence;
        if let Some((_, old)) = self.waiting.insert(item.clone(), (due, sequence)) {
            self.heap_items.remove(&old);
        }
        self.heap_items.insert(sequence, item);
        self.heap.push(Reverse((due, sequence)));
        self.next_due() == Some(due)
    }

    /// Moves delayed keys that are due into the ready queue; returns how
    /// many were queued.
    pub(super) fn release_due(&mut self, now: Instant) -> usize {
        let mut queued = 0;
        while let Some(Reverse((due, sequence))) = self.heap.peek().copied() {
            if due > now {
                break;
            }
            self.heap.pop();
            let Some(item) = self.heap_items.remove(&sequence) else {
                continue; // superseded by an earlier entry
            };
            self.waiting.remove(&item);
            if matches!(self.add(item, now), Added::Queued) {
                queued += 1;
            }
        }
        queued
    }

    /// When the earliest delayed key is due.
    pub(super) fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((due, sequence))) = self.heap.peek().copied() {
            if self.heap_items.contains_key(&sequence) {
                return Some(due);
            }
            self.heap.pop();
        }
        None
    }

    /// Keys ready to hand out.
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Seconds of unfinished work summed, and the longest one.
    pub(super) fn in_progress(&self, now: Instant) -> (f64, f64) {
        self.processing
            .values()
            .fold((0.0, 0.0), |(sum, longest), started| {
                let secs = now.saturating_duration_since(*started).as_secs_f64();
                (sum + secs, f64::max(longest, secs))
            })
    }
}

/// What an add did.
#[derive(Debug, PartialEq)]
pub(super) enum Added {
    /// New in the ready queue.
    Queued,
    /// Already waiting; nothing changed.
    AlreadyQueued,
    /// Being processed: it is queued again when `done`.
    AfterProcessing,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_key_is_queued_once_and_never_handed_out_twice_at_once() {
        let now = Instant::now();
        let mut state = State::new();
        assert_eq!(state.add("a", now), Added::Queued);
        assert_eq!(state.add("a", now), Added::AlreadyQueued);
        assert_eq!(state.len(), 1);
        let (item, _) = state.take(now).unwrap();
        assert_eq!(item, "a");
        // Added while processing: not handed out until done.
        assert_eq!(state.add("a", now), Added::AfterProcessing);
        assert!(state.take(now).is_none());
        let (_, requeued) = state.done(&"a", now);
        assert!(requeued);
        assert_eq!(state.take(now).map(|(i, _)| i), Some("a"));
        let (_, requeued) = state.done(&"a", now);
        assert!(!requeued);
        assert!(state.take(now).is_none());
    }

    #[test]
    fn a_delayed_key_keeps_its_earliest_due_time() {
        let now = Instant::now();
        let mut state = State::new();
        assert!(state.add_at("a", now + Duration::from_secs(10)));
        assert!(!state.add_at("a", now + Duration::from_secs(20)));
        assert!(state.add_at("a", now + Duration::from_secs(5)));
        assert_eq!(state.next_due(), Some(now + Duration::from_secs(5)));
        assert_eq!(state.release_due(now + Duration::from_secs(4)), 0);
        assert_eq!(state.release_due(now + Duration::from_secs(5)), 1);
        // The superseded entries at 10 s and 20 s are gone with it.
        assert_eq!(state.next_due(), None);
        assert_eq!(state.release_due(now + Duration::from_secs(30)), 0);
        assert_eq!(state.len(), 1);
    }
}
