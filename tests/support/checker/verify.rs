//! Every check of a fault run in one place: the errors clients were
//! answered with, the history settled with the watch and checked for
//! linearizability, each watcher's stream against the acknowledged writes,
//! all watchers against each other, and then the same checks fed this
//! very run with each kind of violation planted in it (`plant`), each of
//! which they must catch.

use std::collections::{HashMap, HashSet};

use super::plant::{self, Plant};
use super::watch::{self, Event, Expectation, Write};
use super::{check, check_key, resolve, LinearizabilityError, DEFAULT_BUDGET};
use crate::history::Operation;

/// What a run recorded.
pub struct Run<'a> {
    pub ops: &'a [Operation],
    /// Each watcher's events; the first settles ambiguous writes.
    pub streams: &'a [Vec<Event>],
    pub acked: &'a [Write],
    pub issued: &'a HashSet<String>,
    /// Errors clients were answered with that leave no outcome unknown
    /// and that the server was not entitled to (each a failure).
    pub errors: &'a [String],
    /// The watched range, `(after, until]`.
    pub after: i64,
    pub until: i64,
    /// Whether every revision in range belongs to the watched keys.
    pub every_revision: bool,
    /// The violations to plant, each of which the checks must catch.
    pub plants: &'a [Plant],
}

/// What the checks found, and what they noted on the way.
#[derive(Default)]
pub struct Findings {
    pub violations: Vec<String>,
    pub notes: Vec<String>,
}

/// How many of a run's unexplained errors a report spells out.
const ERRORS_SHOWN: usize = 5;

pub fn verify(run: &Run) -> Findings {
    let mut findings = Findings::default();
    if !run.errors.is_empty() {
        findings.violations.push(format!(
            "{} requests answered with an error no fault explains (only a timeout, a dropped \
             connection or an unavailable server leave an outcome unknown), e.g.:\n    {}",
            run.errors.len(),
            run.errors[..run.errors.len().min(ERRORS_SHOWN)].join("\n    ")
        ));
    }
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
    let failed: HashSet<String> = errors.iter().map(|e| e.key().to_string()).collect();
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
    findings.notes.push("planted violations:".into());
    for &kind in run.plants {
        match planted(kind, &resolved.ops, &failed, &run.streams[0], &expect) {
            Ok(line) => findings.notes.push(format!("  {kind:?} caught: {line}")),
            Err(why) => findings
                .violations
                .push(format!("planted {kind:?} not caught: {why}")),
        }
    }
    findings
}

/// Plants `kind` in the run and checks it again: Ok(where and what the
/// check said) if the check named it, Err(why not) otherwise.
fn planted(
    kind: Plant,
    ops: &[Operation],
    failed: &HashSet<String>,
    stream: &[Event],
    expect: &Expectation,
) -> Result<String, String> {
    if plant::is_linearizability(kind) {
        let nowhere = match failed.is_empty() {
            true => "no place to plant it".to_string(),
            false => format!(
                "no place to plant it but the {} keys that already failed",
                failed.len()
            ),
        };
        let planted = plant::in_history(kind, ops, failed).ok_or(nowhere)?;
        let on_key: Vec<&Operation> = planted
            .ops
            .iter()
            .filter(|o| o.key == planted.key)
            .collect();
        return match check_key(&planted.key, &on_key, DEFAULT_BUDGET) {
            Err(illegal @ LinearizabilityError::Illegal { .. }) => {
                Ok(format!("{illegal} ({})", planted.at))
            }
            Err(exhausted) => Err(format!("{exhausted}, not illegal ({})", planted.at)),
            Ok(()) => Err(format!("accepted as linearizable ({})", planted.at)),
        };
    }
    let planted = plant::in_stream(kind, stream, expect.acked).ok_or("no place to plant it")?;
    let found = watch::check(&planted.events, expect);
    match found.contains(&planted.expected) {
        true => Ok(format!("{} ({})", planted.expected, planted.at)),
        false => Err(format!("found {found:?} ({})", planted.at)),
    }
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
