//! The watch guarantees, checked on the events one watcher received
//! (across its reconnections) against the writes clients were told
//! succeeded: ordered, unique, atomic (a revision's events arrive in one
//! response), reliable (no acknowledged write missing, and with
//! `every_revision` no revision skipped), and resumable (a stream resumed
//! from its last revision + 1 is checked as one stream, so a resumption
//! that loses or repeats an event fails the same checks).

use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Put,
    Delete,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Put => "put",
            Kind::Delete => "delete",
        })
    }
}

/// One delivered event. `response` numbers the response (or, for a REST
/// watch, the line) it arrived in, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub revision: i64,
    pub key: String,
    pub kind: Kind,
    pub value: Option<String>,
    pub response: u64,
}

/// A write a client was told succeeded, at the revision it was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub revision: i64,
    pub key: String,
    pub kind: Kind,
    pub value: Option<String>,
}

/// What the stream must contain: every revision in `(from, until]` the
/// watcher covers, the acknowledged writes among them, and nothing but
/// values some client sent.
pub struct Expectation<'a> {
    /// The stream starts after this revision.
    pub after: i64,
    /// The last revision the stream must have reached.
    pub until: i64,
    pub acked: &'a [Write],
    /// Every value any client sent (acknowledged or not).
    pub issued: &'a HashSet<String>,
    /// Every revision in range was written under the watched keys, so a
    /// skipped revision is a lost event.
    pub every_revision: bool,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WatchViolation {
    #[error("event {index} at revision {revision} came after revision {previous}")]
    Reordered {
        index: usize,
        revision: i64,
        previous: i64,
    },
    #[error("{key} at revision {revision} was delivered twice")]
    Duplicate { key: String, revision: i64 },
    #[error("revision {revision} was split across responses")]
    Split { revision: i64 },
    #[error("acknowledged {kind} of {key} at revision {revision} was never delivered")]
    Missing {
        key: String,
        revision: i64,
        kind: Kind,
    },
    #[error("event {key} at revision {revision} differs from the acknowledged write")]
    Mismatch { key: String, revision: i64 },
    #[error("revisions {first}..={last} were skipped")]
    Gap { first: i64, last: i64 },
    #[error("event {key} at revision {revision} carries a value no client wrote")]
    Unwritten { key: String, revision: i64 },
    #[error("event {key} at revision {revision} is outside ({after}, {until}]")]
    OutOfRange {
        key: String,
        revision: i64,
        after: i64,
        until: i64,
    },
}

/// Every violation of the guarantees in `events`.
pub fn check(events: &[Event], expect: &Expectation) -> Vec<WatchViolation> {
    let mut violations = order_and_atomicity(events);
    violations.extend(content(events, expect));
    violations.extend(reliability(events, expect));
    violations
}

fn order_and_atomicity(events: &[Event]) -> Vec<WatchViolation> {
    let mut violations = Vec::new();
    let mut delivered: HashSet<(i64, &str)> = HashSet::new();
    let mut response_of: HashMap<i64, u64> = HashMap::new();
    let mut previous = i64::MIN;
    for (index, event) in events.iter().enumerate() {
        if event.revision < previous {
            violations.push(WatchViolation::Reordered {
                index,
                revision: event.revision,
                previous,
            });
        }
        previous = previous.max(event.revision);
        if !delivered.insert((event.revision, &event.key)) {
            violations.push(WatchViolation::Duplicate {
                key: event.key.clone(),
                revision: event.revision,
            });
        }
        let response = *response_of.entry(event.revision).or_insert(event.response);
        if response != event.response {
            violations.push(WatchViolation::Split {
                revision: event.revision,
            });
        }
    }
    violations
}

fn content(events: &[Event], expect: &Expectation) -> Vec<WatchViolation> {
    let mut violations = Vec::new();
    for event in events {
        let (key, revision) = (event.key.clone(), event.revision);
        if revision <= expect.after {
            violations.push(WatchViolation::OutOfRange {
                key,
                revision,
                after: expect.after,
                until: expect.until,
            });
        } else if event
            .value
            .as_ref()
            .is_some_and(|v| !expect.issued.contains(v))
        {
            violations.push(WatchViolation::Unwritten { key, revision });
        }
    }
    violations
}

fn reliability(events: &[Event], expect: &Expectation) -> Vec<WatchViolation> {
    let mut violations = Vec::new();
    let by_write: HashMap<(i64, &str), &Event> = events
        .iter()
        .map(|e| ((e.revision, e.key.as_str()), e))
        .collect();
    let in_range = |revision: i64| revision > expect.after && revision <= expect.until;
    for write in expect.acked.iter().filter(|w| in_range(w.revision)) {
        let (key, revision) = (write.key.clone(), write.revision);
        match by_write.get(&(write.revision, write.key.as_str())) {
            None => violations.push(WatchViolation::Missing {
                key,
                revision,
                kind: write.kind,
            }),
            Some(event) if event.kind != write.kind || event.value != write.value => {
                violations.push(WatchViolation::Mismatch { key, revision })
            }
            Some(_) => {}
        }
    }
    if expect.every_revision {
        let revisions: HashSet<i64> = events.iter().map(|e| e.revision).collect();
        let mut first = None;
        for revision in expect.after + 1..=expect.until + 1 {
            match (
                revisions.contains(&revision) || revision > expect.until,
                first,
            ) {
                (false, None) => first = Some(revision),
                (true, Some(start)) => {
                    violations.push(WatchViolation::Gap {
                        first: start,
                        last: revision - 1,
                    });
                    first = None;
                }
                _ => {}
            }
        }
    }
    violations
}
