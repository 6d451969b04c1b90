//! Every check of a fault run in one place: the history settled with the
//! watch and checked for linearizability, a planted stale read that must
//! be rejected, each watcher's stream against the acknowledged writes,
//! and all watchers against each other.

use std::collections::{HashMap, HashSet};

use super::watch::{self, Event, Expectation, Write};
use super::{check, resolve, with_stale_read, DEFAULT_BUDGET};
use crate::history::Operation;

/// What a run recorded.
pub struct Run<'a> {
    pub ops: &'a [Operation],
    /// Each watcher's events; the first settles ambiguous writes.
    pub streams: &'a [Vec<Event>],
    pub acked: &'a [Write],
    pub issued: &'a HashSet<String>,
    /// The watched range, `(after, until]`.
    pub after: i64,
    pub until: i64,
    /// Whether every revision in range belongs to the watched keys.
    pub every_revision: bool,
}

/// What the checks found, and what they noted on the way.
#[derive(Default)]
pub struct Findings {
    pub violations: Vec<String>,
    pub notes: Vec<String>,
}

pub fn verify(run: &Run) -> Findings {
    let mut findings = Findings::default();
    let applied: HashMap<(String, String), i64> = run.streams[0]
        .iter()
        .filter_map(|e| Some(((e.key.clone(), e.value.clone()?), e.revision)))
        .collect();
    let resolved = resolve::resolve(run.ops, &applied);
    findings.notes.push(format!(
        "ambiguous operations: {} recorded, {} left after resolving with the watch",
        run.ops.iter().filter(|op| op.is_ambiguous()).count(),
        resolved.ops.iter().filter(|op| op.is_ambiguous()).count()
    ));
    findings.violations.extend(resolved.anomalies);
    let errors = check(&resolved.ops, DEFAULT_BUDGET);
    findings
        .violations
        .extend(errors.iter().map(ToString::to_string));
    // The same check must reject this very history with one read made
    // stale, or it proves nothing.
    let planted = with_stale_read(&resolved.ops).map(|ops| check(&ops, DEFAULT_BUDGET));
    match planted.as_deref().and_then(<[_]>::first) {
        Some(error) => findings
            .notes
            .push(format!("planted stale read rejected: {error}")),
        None => findings
            .violations
            .push("no planted stale read was rejected (or none could be planted)".into()),
    }
    let expect = Expectation {
        after: run.after,
        until: run.until,
        acked: run.acked,
        issued: run.issued,
        every_revision: run.every_revision,
    };
    for (i, events) in run.streams.iter().enumerate() {
        let found = watch::check(events, &expect);
        findings
            .violations
            .extend(found.iter().map(|v| format!("watcher {i}: {v}")));
    }
    if run.streams.iter().any(|s| !same_events(&run.streams[0], s)) {
        findings
            .violations
            .push("the watchers saw different events".into());
    }
    findings
}

/// The same changes in the same order (however they were batched).
fn same_events(a: &[Event], b: &[Event]) -> bool {
    let strip = |events: &[Event]| -> Vec<(i64, String, Option<String>)> {
        events
            .iter()
            .map(|e| (e.revision, e.key.clone(), e.value.clone()))
            .collect()
    };
    strip(a) == strip(b)
}
