//! Narrowing ambiguous writes with a watch, as etcd's robustness tests do.
//! Every write sends a value no other write sends, and a watch that passed
//! the watch checks saw every revision. So an ambiguous put or CAS whose
//! value the watch never delivered took no effect and can be left out, and
//! one whose value it delivered at revision r did take effect, no later
//! than the first answer that carried a revision of r or more. Without
//! this, each ambiguous write stays pending to the end of the history and
//! the search doubles with every one of them.

use std::collections::HashMap;

use crate::history::{Input, Operation, Output};

/// The history to check, and anomalies found while resolving (an answer
/// that carried a write's revision before that write was even sent).
pub struct Resolved {
    pub ops: Vec<Operation>,
    pub anomalies: Vec<String>,
}

/// `applied` maps (key, value) to the revision the watch delivered it at.
pub fn resolve(ops: &[Operation], applied: &HashMap<(String, String), i64>) -> Resolved {
    let bound = answered_by_revision(ops);
    let mut resolved = Resolved {
        ops: Vec::with_capacity(ops.len()),
        anomalies: Vec::new(),
    };
    for op in ops {
        let written = match &op.input {
            Input::Put { value } | Input::Cas { value, .. } | Input::Patch { value }
                if op.is_ambiguous() =>
            {
                value
            }
            _ => {
                resolved.ops.push(op.clone());
                continue;
            }
        };
        let Some(&revision) = applied.get(&(op.key.clone(), written.clone())) else {
            continue; // never applied: no effect on any state
        };
        let mut op = op.clone();
        op.revision = Some(revision);
        if let Some(ret) = bound(revision) {
            if ret < op.call {
                resolved.anomalies.push(format!(
                    "revision {revision} was answered before its write was sent: {op}"
                ));
            }
            op.ret = Some(ret.max(op.call));
            op.output = match op.input {
                Input::Cas { .. } => Output::Cas { succeeded: true },
                Input::Patch { .. } => Output::Patch { found: true },
                _ => Output::Put,
            };
        }
        resolved.ops.push(op);
    }
    resolved
}

/// For a revision r: the earliest return among answered operations that
/// carried a revision of r or more.
fn answered_by_revision(ops: &[Operation]) -> impl Fn(i64) -> Option<u64> {
    let mut answered: Vec<(i64, u64)> = ops
        .iter()
        .filter_map(|op| Some((op.revision?, op.ret?)))
        .collect();
    answered.sort();
    // Suffix minimum of return times, by revision.
    let mut earliest = vec![u64::MAX; answered.len() + 1];
    for i in (0..answered.len()).rev() {
        earliest[i] = earliest[i + 1].min(answered[i].1);
    }
    move |revision| {
        let from = answered.partition_point(|(r, _)| *r < revision);
        (earliest[from] != u64::MAX).then_some(earliest[from])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        input: Input,
        output: Output,
        call: u64,
        ret: Option<u64>,
        revision: Option<i64>,
    ) -> Operation {
        Operation {
            client: 0,
            key: "k".into(),
            input,
            output,
            call,
            ret,
            revision,
        }
    }

    fn put(v: &str) -> Input {
        Input::Put { value: v.into() }
    }

    #[test]
    fn an_unseen_ambiguous_write_is_left_out_and_a_seen_one_is_bounded() {
        let ops = [
            op(put("lost"), Output::Unknown, 0, None, None),
            op(put("kept"), Output::Unknown, 1, None, None),
            op(
                Input::Get,
                Output::Get(Some("kept".into())),
                2,
                Some(9),
                Some(7),
            ),
            op(
                Input::Get,
                Output::Get(Some("kept".into())),
                3,
                Some(8),
                Some(5),
            ),
        ];
        let applied = HashMap::from([(("k".to_string(), "kept".to_string()), 6)]);
        let resolved = resolve(&ops, &applied);
        assert!(resolved.anomalies.is_empty());
        assert_eq!(resolved.ops.len(), 3);
        let kept = &resolved.ops[0];
        assert_eq!(
            (kept.ret, &kept.output, kept.revision),
            (Some(9), &Output::Put, Some(6))
        );
    }

    #[test]
    fn a_seen_cas_succeeded_and_an_early_answer_is_an_anomaly() {
        let cas = Input::Cas {
            expect: None,
            value: "v".into(),
        };
        let ops = [
            op(Input::Get, Output::Get(None), 0, Some(1), Some(4)),
            op(cas, Output::Unknown, 2, None, None),
        ];
        let applied = HashMap::from([(("k".to_string(), "v".to_string()), 4)]);
        let resolved = resolve(&ops, &applied);
        assert_eq!(resolved.ops[1].output, Output::Cas { succeeded: true });
        assert_eq!(resolved.anomalies.len(), 1, "{:?}", resolved.anomalies);
    }
}
