//! Violations planted in the history and watch streams a real run
//! recorded, to show that the checks that passed the run would have
//! failed it. Each is planted inside the concurrent part of the run: an
//! operation near the middle of the traffic, overlapping others on its
//! key where one does (never a final read after the traffic stopped), or
//! an event in the middle of a stream. A plant counts as caught only when
//! the check names it: the linearizability search says "illegal" on the
//! planted key (giving up on its step budget is not a verdict), or the
//! watch check reports the planted event's violation.

use std::collections::{HashMap, HashSet};

use super::watch::{Event, Kind, WatchViolation, Write};
use crate::history::{Input, Operation, Output, FINAL_READER};

/// Every kind of violation the checks claim to catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// A read returns a value an acknowledged write had already replaced.
    StaleRead,
    /// An acknowledged put that no later read shows.
    LostWrite,
    /// A compare-and-swap reported failed although its value was written.
    WrongCas,
    /// A watch skips a revision that holds an acknowledged write.
    WatchGap,
    /// A watch delivers an event twice.
    DuplicateEvent,
    /// A watch delivers an event after a later revision's.
    ReorderedEvent,
    /// A watch leaves out the deletion of an object.
    MissingDelete,
    /// A watch splits one revision's events across responses.
    SplitRevision,
}

/// What the etcd profile plants: every kind.
pub const EVERY_PLANT: [Plant; 8] = [
    Plant::StaleRead,
    Plant::LostWrite,
    Plant::WrongCas,
    Plant::WatchGap,
    Plant::DuplicateEvent,
    Plant::ReorderedEvent,
    Plant::MissingDelete,
    Plant::SplitRevision,
];

/// What a REST watch profile plants: every kind but a split revision
/// (each event is its own line there, so a revision cannot be split).
pub fn for_rest_watches() -> Vec<Plant> {
    let split = |p: &Plant| *p == Plant::SplitRevision;
    EVERY_PLANT.into_iter().filter(|p| !split(p)).collect()
}

/// The value the planted lost write writes (no client sends it).
const LOST_VALUE: &str = "planted-lost-write";

/// A history with one violation planted: the key to check and where.
pub struct PlantedHistory {
    pub ops: Vec<Operation>,
    pub key: String,
    pub at: String,
}

/// A stream with one violation planted, and the violation the watch
/// check must report for it.
pub struct PlantedStream {
    pub events: Vec<Event>,
    pub expected: WatchViolation,
    pub at: String,
}

/// Plants `plant` (a linearizability kind) in `ops`, on none of the keys
/// in `failed` (where the real history is already wrong, a planted
/// violation would prove nothing); None if the run has no place for it.
pub fn in_history(
    plant: Plant,
    ops: &[Operation],
    failed: &HashSet<String>,
) -> Option<PlantedHistory> {
    let sample = Sample::new(ops, failed);
    match plant {
        Plant::StaleRead => sample.stale_read(),
        Plant::LostWrite => sample.lost_write(),
        Plant::WrongCas => sample.wrong_cas(),
        _ => None,
    }
}

/// Plants `plant` (a watch kind) in `events`; None if the stream has no
/// place for it. `acked` are the writes clients were told succeeded.
pub fn in_stream(plant: Plant, events: &[Event], acked: &[Write]) -> Option<PlantedStream> {
    let acked: HashMap<(i64, &str), Kind> = acked
        .iter()
        .map(|w| ((w.revision, w.key.as_str()), w.kind))
        .collect();
    let is_acked = |e: &Event| acked.get(&(e.revision, e.key.as_str())) == Some(&e.kind);
    match plant {
        Plant::WatchGap => gap(events, |e| e.kind == Kind::Put && is_acked(e)),
        Plant::MissingDelete => gap(events, |e| e.kind == Kind::Delete && is_acked(e)),
        Plant::DuplicateEvent => duplicate(events),
        Plant::ReorderedEvent => reorder(events),
        Plant::SplitRevision => split(events),
        _ => None,
    }
}

/// Whether `plant` is checked by the linearizability search.
pub fn is_linearizability(plant: Plant) -> bool {
    matches!(plant, Plant::StaleRead | Plant::LostWrite | Plant::WrongCas)
}

/// Candidates are tried nearest the middle of the traffic first; only
/// this many are looked at for an overlapping one before any will do.
const NEAREST: usize = 500;

/// A history seen by key, with the middle of its traffic.
struct Sample<'a> {
    ops: &'a [Operation],
    by_key: HashMap<&'a str, Vec<&'a Operation>>,
    middle: u64,
    failed: &'a HashSet<String>,
}

impl<'a> Sample<'a> {
    fn new(ops: &'a [Operation], failed: &'a HashSet<String>) -> Sample<'a> {
        let mut by_key: HashMap<&str, Vec<&Operation>> = HashMap::new();
        for op in ops {
            by_key.entry(op.key.as_str()).or_default().push(op);
        }
        let traffic = ops.iter().filter(|op| op.client != FINAL_READER);
        let (first, last) = traffic.fold((u64::MAX, 0), |(first, last), op| {
            (first.min(op.call), last.max(op.ret.unwrap_or(op.call)))
        });
        Sample {
            ops,
            by_key,
            middle: first / 2 + last / 2,
            failed,
        }
    }

    fn same_key(&self, op: &Operation) -> &[&'a Operation] {
        self.by_key.get(op.key.as_str()).map_or(&[], Vec::as_slice)
    }

    /// Whether another operation on `op`'s key ran while `op` did.
    fn overlapped(&self, op: &Operation) -> bool {
        let end = op.ret.unwrap_or(u64::MAX);
        self.same_key(op)
            .iter()
            .any(|o| !std::ptr::eq(*o, op) && o.call < end && op.call < o.ret.unwrap_or(u64::MAX))
    }

    /// The first operation (by index) nearest the middle of the traffic
    /// for which `fits` finds a plant, preferring ones that overlapped
    /// another operation on their key.
    fn pick<T>(&self, fits: impl Fn(usize) -> Option<T>) -> Option<(usize, T)> {
        let mut order: Vec<usize> = (0..self.ops.len())
            .filter(|&i| self.ops[i].client != FINAL_READER)
            .filter(|&i| !self.failed.contains(&self.ops[i].key))
            .collect();
        order.sort_by_key(|&i| self.ops[i].call.abs_diff(self.middle));
        let overlapping = order
            .iter()
            .take(NEAREST)
            .filter(|&&i| self.overlapped(&self.ops[i]));
        overlapping
            .chain(order.iter())
            .find_map(|&i| fits(i).map(|t| (i, t)))
    }

    fn planted(&self, index: usize, op: Operation, what: &str) -> PlantedHistory {
        let at = format!("{what}: {op}");
        let key = op.key.clone();
        let mut ops = self.ops.to_vec();
        if index < ops.len() {
            ops[index] = op;
        } else {
            ops.push(op);
        }
        PlantedHistory { ops, key, at }
    }

    fn stale_read(&self) -> Option<PlantedHistory> {
        let (index, stale) = self.pick(|i| {
            let read = &self.ops[i];
            (read.input == Input::Get && read.ret.is_some())
                .then(|| stale_value(self.same_key(read), read))
                .flatten()
        })?;
        let mut read = self.ops[index].clone();
        read.output = Output::Get(Some(stale));
        Some(self.planted(index, read, "a read made stale"))
    }

    /// An acknowledged put placed after the write of the value a later
    /// read returned, and before that read: the read should have seen it.
    fn lost_write(&self) -> Option<PlantedHistory> {
        let (index, write_ret) = self.pick(|i| {
            let read = &self.ops[i];
            let Output::Get(Some(value)) = &read.output else {
                return None;
            };
            let done = self.writer_of(read, value)?.ret?;
            (read.ret.is_some() && done + 3 <= read.call).then_some(done)
        })?;
        let read = &self.ops[index];
        let gap = read.call - write_ret;
        let lost = Operation {
            client: read.client,
            key: read.key.clone(),
            input: Input::Put {
                value: LOST_VALUE.into(),
            },
            output: Output::Put,
            call: write_ret + gap / 3,
            ret: Some(write_ret + 2 * gap / 3),
            revision: None,
        };
        let what = format!("an acknowledged put nothing saw, before the read {read}");
        Some(self.planted(self.ops.len(), lost, &what))
    }

    /// A successful compare-and-swap whose value a later read returned,
    /// reported failed.
    fn wrong_cas(&self) -> Option<PlantedHistory> {
        let (index, ()) = self.pick(|i| {
            let cas = &self.ops[i];
            let (Input::Cas { value, .. }, Output::Cas { succeeded: true }, Some(ret)) =
                (&cas.input, &cas.output, cas.ret)
            else {
                return None;
            };
            let seen = Output::Get(Some(value.clone()));
            self.same_key(cas)
                .iter()
                .any(|r| r.call > ret && r.output == seen)
                .then_some(())
        })?;
        let mut cas = self.ops[index].clone();
        cas.output = Output::Cas { succeeded: false };
        Some(self.planted(index, cas, "a compare-and-swap reported failed"))
    }

    /// The answered write that wrote `value` on `read`'s key.
    fn writer_of(&self, read: &Operation, value: &str) -> Option<&'a Operation> {
        self.same_key(read)
            .iter()
            .copied()
            .find(|op| written(op).is_some_and(|v| v == value))
    }
}

/// A value written on `read`'s key by a write that, like another write
/// after it, was acknowledged before `read` was sent (values are unique,
/// so it cannot be current), and that `read` did not return.
fn stale_value(same_key: &[&Operation], read: &Operation) -> Option<String> {
    let writes: Vec<&&Operation> = same_key
        .iter()
        .filter(|op| op.ret.is_some_and(|ret| ret < read.call) && changed(op))
        .collect();
    writes.iter().find_map(|old| {
        let value = written(old)?;
        let overwritten = writes
            .iter()
            .any(|new| new.call > old.ret.unwrap_or(u64::MAX));
        (overwritten && read.output != Output::Get(Some(value.clone()))).then(|| value.clone())
    })
}

/// Whether an answered operation changed its key.
fn changed(op: &Operation) -> bool {
    matches!(
        op.output,
        Output::Put
            | Output::Cas { succeeded: true }
            | Output::Patch { found: true }
            | Output::Delete { deleted: true }
    )
}

/// The value an answered operation wrote, if it wrote one.
fn written(op: &Operation) -> Option<&String> {
    match (&op.input, changed(op)) {
        (Input::Put { value } | Input::Cas { value, .. } | Input::Patch { value }, true) => {
            Some(value)
        }
        _ => None,
    }
}

/// Indices of `events` nearest the middle of the stream first, leaving
/// out its first and last events.
fn middle_out(events: &[Event]) -> Vec<usize> {
    let middle = events.len() / 2;
    let mut order: Vec<usize> = (1..events.len().saturating_sub(1)).collect();
    order.sort_by_key(|&i| i.abs_diff(middle));
    order
}

fn describe(what: &str, event: &Event) -> String {
    let (kind, key, revision) = (event.kind, &event.key, event.revision);
    format!("{what}: {kind} of {key} at revision {revision}")
}

/// Every event of one revision removed; the first that `fits` is named.
fn gap(events: &[Event], fits: impl Fn(&Event) -> bool) -> Option<PlantedStream> {
    let index = middle_out(events).into_iter().find(|&i| fits(&events[i]))?;
    let gone = events[index].clone();
    let kept = events
        .iter()
        .filter(|e| e.revision != gone.revision)
        .cloned()
        .collect();
    let what = match gone.kind {
        Kind::Delete => "a deletion left out",
        Kind::Put => "a revision skipped",
    };
    Some(PlantedStream {
        events: kept,
        expected: WatchViolation::Missing {
            key: gone.key.clone(),
            revision: gone.revision,
            kind: gone.kind,
        },
        at: describe(what, &gone),
    })
}

/// One event delivered again with the rest of its revision.
fn duplicate(events: &[Event]) -> Option<PlantedStream> {
    let index = *middle_out(events).first()?;
    let again = events[index].clone();
    let last_of_revision = events
        .iter()
        .rposition(|e| e.revision == again.revision)
        .unwrap_or(index);
    let mut planted = events.to_vec();
    planted.insert(last_of_revision + 1, again.clone());
    Some(PlantedStream {
        events: planted,
        expected: WatchViolation::Duplicate {
            key: again.key.clone(),
            revision: again.revision,
        },
        at: describe("an event delivered twice", &again),
    })
}

/// Two neighbouring events of different revisions swapped.
fn reorder(events: &[Event]) -> Option<PlantedStream> {
    let index = middle_out(events)
        .into_iter()
        .find(|&i| events[i + 1].revision > events[i].revision)?;
    let mut planted = events.to_vec();
    planted.swap(index, index + 1);
    let (moved, ahead) = (&events[index], &events[index + 1]);
    Some(PlantedStream {
        expected: WatchViolation::Reordered {
            index: index + 1,
            revision: moved.revision,
            previous: ahead.revision,
        },
        at: describe("an event delivered after a later one", moved),
        events: planted,
    })
}

/// The last event of a revision with several moved to a response of its
/// own.
fn split(events: &[Event]) -> Option<PlantedStream> {
    let index = middle_out(events)
        .into_iter()
        .find(|&i| events[i].revision == events[i - 1].revision)?;
    let fresh = events.iter().map(|e| e.response).max().unwrap_or(0) + 1;
    let mut planted = events.to_vec();
    planted[index].response = fresh;
    Some(PlantedStream {
        expected: WatchViolation::Split {
            revision: events[index].revision,
        },
        at: describe("a revision split across responses", &events[index]),
        events: planted,
    })
}
