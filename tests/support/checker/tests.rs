//! The checker's selftest: it accepts correct histories (with concurrency
//! and ambiguous outcomes) and catches a stale read, a lost write, a wrong
//! CAS, and a watch gap, duplicate, reorder and split revision; and every
//! violation `plant` plants in a busy history is caught.

use std::collections::HashSet;

use super::watch::{self, Event, Expectation, Kind, WatchViolation, Write};
use super::{check, plant, LinearizabilityError, DEFAULT_BUDGET};
use crate::history::{Input, Operation, Output};

fn op(client: usize, input: Input, output: Output, call: u64, ret: Option<u64>) -> Operation {
    Operation {
        client,
        key: "k".into(),
        input,
        output,
        call,
        ret,
        revision: None,
    }
}

fn put(v: &str) -> Input {
    Input::Put { value: v.into() }
}

fn got(v: Option<&str>) -> Output {
    Output::Get(v.map(String::from))
}

fn cas(expect: Option<&str>, value: &str) -> Input {
    Input::Cas {
        expect: expect.map(String::from),
        value: value.into(),
    }
}

fn verdict(ops: &[Operation]) -> Vec<LinearizabilityError> {
    check(ops, DEFAULT_BUDGET)
}

fn illegal(ops: &[Operation]) -> bool {
    matches!(
        verdict(ops).as_slice(),
        [LinearizabilityError::Illegal { .. }]
    )
}

#[test]
fn a_sequential_history_is_linearizable() {
    let ops = [
        op(0, Input::Get, got(None), 0, Some(1)),
        op(0, put("a"), Output::Put, 2, Some(3)),
        op(
            0,
            cas(Some("a"), "b"),
            Output::Cas { succeeded: true },
            4,
            Some(5),
        ),
        op(
            0,
            cas(Some("a"), "c"),
            Output::Cas { succeeded: false },
            6,
            Some(7),
        ),
        op(0, Input::Get, got(Some("b")), 8, Some(9)),
        op(
            0,
            Input::Delete,
            Output::Delete { deleted: true },
            10,
            Some(11),
        ),
        op(
            0,
            Input::Delete,
            Output::Delete { deleted: false },
            12,
            Some(13),
        ),
        op(
            0,
            cas(None, "d"),
            Output::Cas { succeeded: true },
            14,
            Some(15),
        ),
    ];
    assert_eq!(verdict(&ops), vec![]);
}

#[test]
fn concurrent_operations_may_take_effect_in_either_order() {
    // The read overlaps both puts and sees the one that started second.
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(10)),
        op(1, put("b"), Output::Put, 1, Some(9)),
        op(2, Input::Get, got(Some("a")), 2, Some(12)),
        op(2, Input::Get, got(Some("a")), 13, Some(14)),
    ];
    assert_eq!(verdict(&ops), vec![]);
}

#[test]
fn a_stale_read_is_caught() {
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(0, put("b"), Output::Put, 2, Some(3)),
        op(1, Input::Get, got(Some("a")), 4, Some(5)),
    ];
    assert!(illegal(&ops), "{:?}", verdict(&ops));
}

#[test]
fn a_lost_write_is_caught() {
    // The put was acknowledged, and a read that began after it finds
    // nothing.
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(1, Input::Get, got(None), 2, Some(3)),
    ];
    assert!(illegal(&ops), "{:?}", verdict(&ops));
}

#[test]
fn a_wrong_cas_is_caught() {
    // Two compare-and-swaps from the same value cannot both succeed.
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(
            1,
            cas(Some("a"), "b"),
            Output::Cas { succeeded: true },
            2,
            Some(5),
        ),
        op(
            2,
            cas(Some("a"), "c"),
            Output::Cas { succeeded: true },
            3,
            Some(6),
        ),
    ];
    assert!(illegal(&ops), "{:?}", verdict(&ops));
    // Nor may one fail when the value matched.
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(
            1,
            cas(Some("a"), "b"),
            Output::Cas { succeeded: false },
            2,
            Some(3),
        ),
    ];
    assert!(illegal(&ops), "{:?}", verdict(&ops));
}

#[test]
fn a_wrong_delete_count_is_caught() {
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(
            1,
            Input::Delete,
            Output::Delete { deleted: false },
            2,
            Some(3),
        ),
    ];
    assert!(illegal(&ops), "{:?}", verdict(&ops));
}

#[test]
fn an_ambiguous_write_may_have_happened_or_not() {
    let happened = [
        op(0, put("a"), Output::Unknown, 0, None),
        op(1, Input::Get, got(Some("a")), 5, Some(6)),
    ];
    assert_eq!(verdict(&happened), vec![]);
    let not_happened = [
        op(0, put("a"), Output::Unknown, 0, None),
        op(1, Input::Get, got(None), 5, Some(6)),
    ];
    assert_eq!(verdict(&not_happened), vec![]);
    // But not both: once seen, it stays until overwritten.
    let flickers = [
        op(0, put("a"), Output::Unknown, 0, None),
        op(1, Input::Get, got(Some("a")), 5, Some(6)),
        op(1, Input::Get, got(None), 7, Some(8)),
    ];
    assert!(illegal(&flickers), "{:?}", verdict(&flickers));
    // Nor before it was sent.
    let early = [
        op(1, Input::Get, got(Some("a")), 0, Some(1)),
        op(0, put("a"), Output::Unknown, 2, None),
    ];
    assert!(illegal(&early), "{:?}", verdict(&early));
}

#[test]
fn keys_are_checked_independently() {
    let mut other = op(1, Input::Get, got(Some("x")), 4, Some(5));
    other.key = "other".into();
    let ops = [op(0, put("a"), Output::Put, 0, Some(1)), other];
    assert_eq!(
        verdict(&ops),
        vec![LinearizabilityError::Illegal {
            key: "other".into(),
            ops: 1
        }]
    );
}

#[test]
fn a_long_concurrent_history_is_checked_within_budget() {
    // Four clients, each putting its own values and reading, overlapping.
    let mut ops = Vec::new();
    let mut last = None;
    for i in 0..400u64 {
        let client = (i % 4) as usize;
        let value = format!("v{i}");
        ops.push(op(
            client,
            put(&value),
            Output::Put,
            i * 10,
            Some(i * 10 + 15),
        ));
        if i % 4 == 3 {
            ops.push(op(
                client,
                Input::Get,
                got(last.as_deref()),
                i * 10 + 1,
                Some(i * 10 + 2),
            ));
        }
        last = Some(value);
    }
    // Each read overlaps the put of the value before its own, and no later.
    assert_eq!(verdict(&ops), vec![]);
}

fn event(revision: i64, key: &str, response: u64) -> Event {
    Event {
        revision,
        key: key.into(),
        kind: Kind::Put,
        value: Some(format!("{key}{revision}")),
        response,
    }
}

fn write(revision: i64, key: &str) -> Write {
    Write {
        revision,
        key: key.into(),
        kind: Kind::Put,
        value: Some(format!("{key}{revision}")),
    }
}

fn watch_violations(events: &[Event], acked: &[Write]) -> Vec<WatchViolation> {
    let issued: HashSet<String> = acked.iter().filter_map(|w| w.value.clone()).collect();
    let expect = Expectation {
        after: 1,
        until: 4,
        acked,
        issued: &issued,
        every_revision: true,
    };
    watch::check(events, &expect)
}

fn writes() -> Vec<Write> {
    vec![write(2, "a"), write(3, "b"), write(3, "c"), write(4, "a")]
}

#[test]
fn a_complete_watch_passes() {
    let events = [
        event(2, "a", 0),
        event(3, "b", 1),
        event(3, "c", 1),
        event(4, "a", 2),
    ];
    assert_eq!(watch_violations(&events, &writes()), vec![]);
}

#[test]
fn a_watch_gap_is_caught() {
    let events = [event(2, "a", 0), event(4, "a", 1)];
    let violations = watch_violations(&events, &writes());
    assert!(
        violations.contains(&WatchViolation::Gap { first: 3, last: 3 }),
        "{violations:?}"
    );
    assert!(violations.contains(&WatchViolation::Missing {
        key: "b".into(),
        revision: 3,
        kind: Kind::Put,
    }));
}

#[test]
fn a_duplicate_event_is_caught() {
    let events = [
        event(2, "a", 0),
        event(3, "b", 1),
        event(3, "c", 1),
        event(3, "c", 2),
        event(4, "a", 3),
    ];
    let violations = watch_violations(&events, &writes());
    assert!(
        violations.contains(&WatchViolation::Duplicate {
            key: "c".into(),
            revision: 3
        }),
        "{violations:?}"
    );
}

#[test]
fn a_reordered_event_is_caught() {
    let events = [
        event(3, "b", 0),
        event(3, "c", 0),
        event(2, "a", 1),
        event(4, "a", 2),
    ];
    let violations = watch_violations(&events, &writes());
    assert!(
        violations.contains(&WatchViolation::Reordered {
            index: 2,
            revision: 2,
            previous: 3
        }),
        "{violations:?}"
    );
}

#[test]
fn a_revision_split_across_responses_is_caught() {
    let events = [
        event(2, "a", 0),
        event(3, "b", 1),
        event(3, "c", 2),
        event(4, "a", 3),
    ];
    let violations = watch_violations(&events, &writes());
    assert_eq!(violations, vec![WatchViolation::Split { revision: 3 }]);
}

#[test]
fn an_event_nobody_wrote_is_caught() {
    let mut forged = event(4, "a", 2);
    forged.value = Some("forged".into());
    let events = [event(2, "a", 0), event(3, "b", 1), event(3, "c", 1), forged];
    let violations = watch_violations(&events, &writes());
    assert!(violations.contains(&WatchViolation::Unwritten {
        key: "a".into(),
        revision: 4
    }));
    assert!(violations.contains(&WatchViolation::Mismatch {
        key: "a".into(),
        revision: 4
    }));
}

#[test]
fn a_patch_writes_only_an_existing_key() {
    let patch = |v: &str| Input::Patch { value: v.into() };
    let ops = [
        op(0, patch("a"), Output::Patch { found: false }, 0, Some(1)),
        op(0, put("b"), Output::Put, 2, Some(3)),
        op(0, patch("c"), Output::Patch { found: true }, 4, Some(5)),
        op(0, Input::Get, got(Some("c")), 6, Some(7)),
    ];
    assert_eq!(verdict(&ops), vec![]);
    let on_absent = [op(0, patch("a"), Output::Patch { found: true }, 0, Some(1))];
    assert!(illegal(&on_absent), "{:?}", verdict(&on_absent));
    let not_written = [
        op(0, put("b"), Output::Put, 0, Some(1)),
        op(0, patch("c"), Output::Patch { found: true }, 2, Some(3)),
        op(0, Input::Get, got(Some("b")), 4, Some(5)),
    ];
    assert!(illegal(&not_written), "{:?}", verdict(&not_written));
}

#[test]
fn a_write_the_server_failed_changed_nothing() {
    let ops = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(0, put("b"), Output::Failed, 2, Some(3)),
        op(1, Input::Get, got(Some("a")), 4, Some(5)),
    ];
    assert_eq!(verdict(&ops), vec![]);
    // A server that applied a write it answered with an error is caught.
    let applied = [
        op(0, put("a"), Output::Put, 0, Some(1)),
        op(0, put("b"), Output::Failed, 2, Some(3)),
        op(1, Input::Get, got(Some("b")), 4, Some(5)),
    ];
    assert!(illegal(&applied), "{:?}", verdict(&applied));
}

/// Four clients on one key, overlapping: puts, CASes from the value last
/// read, and reads, each seeing the latest value; and the events a watch
/// of it would deliver.
fn busy_run() -> (Vec<Operation>, Vec<Event>, Vec<Write>) {
    let (mut ops, mut events, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let mut current: Option<String> = None;
    for i in 0..200u64 {
        let client = (i % 4) as usize;
        let (t, value) = (i * 10, format!("v{i}"));
        let revision = i as i64 + 2;
        let written = match i % 5 {
            0 | 2 => op(client, put(&value), Output::Put, t, Some(t + 15)),
            1 => op(
                client,
                Input::Delete,
                Output::Delete { deleted: true },
                t,
                Some(t + 15),
            ),
            3 => op(
                client,
                cas(current.as_deref(), &value),
                Output::Cas { succeeded: true },
                t,
                Some(t + 15),
            ),
            _ => {
                // After the CAS before it returned, before the next write.
                let seen = op(
                    client,
                    Input::Get,
                    got(current.as_deref()),
                    t + 8,
                    Some(t + 9),
                );
                ops.push(seen);
                continue;
            }
        };
        let deleted = written.input == Input::Delete;
        current = (!deleted).then(|| value.clone());
        ops.push(written);
        let kind = if deleted { Kind::Delete } else { Kind::Put };
        writes.push(Write {
            revision,
            key: "k".into(),
            kind,
            value: current.clone(),
        });
        // Every other revision also writes a second key in one response.
        let response = revision as u64;
        events.push(Event {
            revision,
            key: "k".into(),
            kind,
            value: current.clone(),
            response,
        });
        if i % 2 == 0 {
            events.push(Event {
                revision,
                key: "other".into(),
                kind: Kind::Put,
                value: Some(format!("o{i}")),
                response,
            });
        }
    }
    (ops, events, writes)
}

#[test]
fn every_planted_violation_is_caught_in_a_busy_run() {
    let (ops, events, writes) = busy_run();
    assert_eq!(verdict(&ops), vec![]);
    let mut issued: HashSet<String> = writes.iter().filter_map(|w| w.value.clone()).collect();
    issued.extend(events.iter().filter_map(|e| e.value.clone()));
    let expect = Expectation {
        after: 1,
        until: 201,
        acked: &writes,
        issued: &issued,
        every_revision: false,
    };
    assert_eq!(watch::check(&events, &expect), vec![]);
    for kind in plant::EVERY_PLANT {
        if plant::is_linearizability(kind) {
            let planted = plant::in_history(kind, &ops, &HashSet::new());
            let planted = planted.unwrap_or_else(|| panic!("a place for {kind:?}"));
            assert!(illegal(&planted.ops), "{kind:?} at {}", planted.at);
        } else {
            let planted = plant::in_stream(kind, &events, &writes);
            let planted = planted.unwrap_or_else(|| panic!("a place for {kind:?}"));
            let found = watch::check(&planted.events, &expect);
            assert!(found.contains(&planted.expected), "{kind:?}: {found:?}");
        }
    }
}

#[test]
fn plants_go_in_the_middle_of_the_traffic_not_its_final_reads() {
    let (mut ops, _, _) = busy_run();
    let mut last = op(0, Input::Get, got(Some("v198")), 5_000, Some(5_001));
    last.client = crate::history::FINAL_READER;
    ops.push(last);
    let planted =
        plant::in_history(plant::Plant::StaleRead, &ops, &HashSet::new()).expect("a stale read");
    let changed: Vec<usize> = (0..ops.len())
        .filter(|&i| planted.ops[i] != ops[i])
        .collect();
    let [index] = changed[..] else {
        panic!("one read changed: {changed:?}")
    };
    assert!(
        (500..1_500).contains(&ops[index].call),
        "planted at {}",
        planted.at
    );
}

#[test]
fn nothing_is_planted_on_a_key_whose_history_is_already_wrong() {
    let (ops, _, _) = busy_run();
    let failed = HashSet::from(["k".to_string()]);
    assert!(plant::in_history(plant::Plant::StaleRead, &ops, &failed).is_none());
}
