//! Checks a recorded history: linearizability per key (this file) and the
//! watch guarantees (`watch`).
//!
//! The linearizability check is the Wing & Gong search with Lowe's
//! memoisation, as Porcupine runs it: walk the operations in time order,
//! try to linearize each pending call against a single-register model,
//! backtrack when a return is reached whose call could not be placed, and
//! never revisit a (set of linearized operations, model state) pair. Keys
//! are independent registers, so each key is checked on its own, which
//! keeps the search small. An ambiguous operation has no return: it may be
//! placed anywhere after its call, and is simply never placed (it did not
//! happen) once every definite operation has been.

pub mod plant;
pub mod resolve;
pub mod verify;
pub mod watch;

use std::collections::{BTreeMap, HashSet};

use crate::history::{Input, Operation, Output};

/// Search steps allowed per key before giving up on it.
pub const DEFAULT_BUDGET: usize = 5_000_000;

/// Why a key's history was not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LinearizabilityError {
    #[error("key {key}: no linearization of its {ops} operations exists")]
    Illegal { key: String, ops: usize },
    #[error("key {key}: gave up after {steps} search steps ({ops} operations)")]
    Exhausted {
        key: String,
        ops: usize,
        steps: usize,
    },
}

impl LinearizabilityError {
    pub fn key(&self) -> &str {
        match self {
            LinearizabilityError::Illegal { key, .. }
            | LinearizabilityError::Exhausted { key, .. } => key,
        }
    }
}

/// The register's value: None while the key is absent.
type State = Option<String>;

/// The model: the state after `op` from `state`, or None if `op`'s output
/// is impossible from `state`. Ambiguous outputs accept whatever happened.
fn step(state: &State, op: &Operation) -> Option<State> {
    let ambiguous = op.output == Output::Unknown;
    match (&op.input, &op.output) {
        // A write the server said failed changed nothing.
        (Input::Get, Output::Failed) => None,
        (_, Output::Failed) => Some(state.clone()),
        (Input::Put { value }, Output::Put | Output::Unknown) => Some(Some(value.clone())),
        (Input::Get, Output::Get(seen)) => (seen == state).then(|| state.clone()),
        (Input::Get, Output::Unknown) => Some(state.clone()),
        (Input::Delete, Output::Delete { deleted }) => {
            (*deleted == state.is_some()).then_some(None)
        }
        (Input::Delete, Output::Unknown) => Some(None),
        (Input::Patch { value }, Output::Patch { found }) => {
            (*found == state.is_some()).then(|| state.as_ref().map(|_| value.clone()))
        }
        (Input::Patch { value }, Output::Unknown) => Some(state.as_ref().map(|_| value.clone())),
        (Input::Cas { expect, value }, output) => {
            let matches = expect == state;
            let consistent = ambiguous || *output == Output::Cas { succeeded: matches };
            consistent.then(|| {
                if matches {
                    Some(value.clone())
                } else {
                    state.clone()
                }
            })
        }
        _ => None,
    }
}

/// Checks every key of `ops` (starting absent); the keys that failed.
pub fn check(ops: &[Operation], budget: usize) -> Vec<LinearizabilityError> {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    by_key
        .into_iter()
        .filter_map(|(key, ops)| check_key(key, &ops, budget).err())
        .collect()
}

/// Checks one key's operations, all on the same register.
pub fn check_key(key: &str, ops: &[&Operation], budget: usize) -> Result<(), LinearizabilityError> {
    match Search::new(ops).run(budget) {
        Some(true) => Ok(()),
        Some(false) => Err(LinearizabilityError::Illegal {
            key: key.to_string(),
            ops: ops.len(),
        }),
        None => Err(LinearizabilityError::Exhausted {
            key: key.to_string(),
            ops: ops.len(),
            steps: budget,
        }),
    }
}

const NIL: usize = usize::MAX;
const HEAD: usize = 0;

/// The search state: a doubly linked list of call and return events in
/// time order (node 0 is the head; call of op i is node 2i+1, its return
/// 2i+2), from which linearized operations are lifted and put back.
struct Search<'a> {
    ops: &'a [&'a Operation],
    next: Vec<usize>,
    prev: Vec<usize>,
    linearized: Vec<u64>,
    definite_left: usize,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [&'a Operation]) -> Search<'a> {
        // Calls sort before returns at equal times: such operations overlap.
        let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            events.push((op.call, 0, 2 * i + 1));
            events.push((op.ret.unwrap_or(u64::MAX), 1, 2 * i + 2));
        }
        events.sort();
        let size = ops.len() * 2 + 1;
        let (mut next, mut prev) = (vec![NIL; size], vec![NIL; size]);
        let mut last = HEAD;
        for &(_, _, node) in &events {
            next[last] = node;
            prev[node] = last;
            last = node;
        }
        Search {
            ops,
            next,
            prev,
            linearized: vec![0; ops.len().div_ceil(64)],
            definite_left: ops.iter().filter(|op| !op.is_ambiguous()).count(),
        }
    }

    fn unlink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = next;
        if next != NIL {
            self.prev[next] = prev;
        }
    }

    /// Puts back a node unlinked last (the node keeps its own links).
    fn relink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        self.next[prev] = node;
        if next != NIL {
            self.prev[next] = node;
        }
    }

    fn toggle(&mut self, op: usize) {
        self.linearized[op / 64] ^= 1 << (op % 64);
        if !self.ops[op].is_ambiguous() {
            let placed = self.linearized[op / 64] & (1 << (op % 64)) != 0;
            if placed {
                self.definite_left -= 1;
            } else {
                self.definite_left += 1;
            }
        }
    }

    /// Some(verdict), or None once `budget` steps are spent.
    fn run(mut self, budget: usize) -> Option<bool> {
        let mut state: State = None;
        let mut stack: Vec<(usize, State)> = Vec::new();
        let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
        let mut entry = self.next[HEAD];
        for _ in 0..budget {
            if self.definite_left == 0 {
                return Some(true);
            }
            if entry != NIL && entry % 2 == 1 {
                let op = entry / 2;
                if let Some(after) = step(&state, self.ops[op]) {
                    self.toggle(op);
                    if seen.insert((self.linearized.clone(), after.clone())) {
                        stack.push((entry, std::mem::replace(&mut state, after)));
                        self.unlink(entry);
                        self.unlink(entry + 1);
                        entry = self.next[HEAD];
                        continue;
                    }
                    self.toggle(op);
                }
                entry = self.next[entry];
                continue;
            }
            // A return (or the end) whose call is still pending: undo the
            // latest choice and try the next candidate after it.
            let Some((call, before)) = stack.pop() else {
                return Some(false);
            };
            self.relink(call + 1);
            self.relink(call);
            self.toggle(call / 2);
            state = before;
            entry = self.next[call];
        }
        None
    }
}

#[cfg(test)]
mod tests;
