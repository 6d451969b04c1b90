//! A label set summed up in 64 bits (a Bloom filter of its keys and its
//! key/value pairs), and what a selector requires summed up the same way.
//! Counting the pods a selector matches is PodTopologySpread's cost: every
//! pod of every node, once per cycle whenever hundreds of workloads
//! alternate in the queue. A pod whose digest lacks a bit the selector's
//! requires cannot match, and that is known without reading the pod.
//! Digests only rule out; a pod that passes is matched in full.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use kube_core::{Expression, Selector};

/// Each entry sets two of the 64 bits.
fn bits(entry: (&str, &str, &str)) -> u64 {
    let hash = foldhash::fast::FixedState::with_seed(0x6c61_6265_6c73).hash_one(entry);
    (1 << (hash & 63)) | (1 << ((hash >> 6) & 63))
}

fn key_bits(key: &str) -> u64 {
    bits(("key", key, ""))
}

fn pair_bits(key: &str, value: &str) -> u64 {
    bits(("pair", key, value))
}

/// The digest of `labels`: every key and every pair.
pub fn of_labels(labels: &BTreeMap<String, String>) -> u64 {
    labels
        .iter()
        .fold(0, |digest, (k, v)| digest | key_bits(k) | pair_bits(k, v))
}

/// The bits every label set `selector` matches has: its equalities'
/// pairs, and the keys its `In` and `Exists` expressions need. Negative
/// expressions require nothing.
pub fn required_by(selector: &Selector) -> u64 {
    selector.clone().into_iter().fold(0, |digest, expression| {
        digest
            | match &expression {
                Expression::Equal(key, value) => pair_bits(key, value),
                Expression::In(key, values) => match values.len() {
                    1 => values.iter().fold(0, |d, v| d | pair_bits(key, v)),
                    _ => key_bits(key),
                },
                Expression::Exists(key) => key_bits(key),
                _ => 0,
            }
    })
}

/// Whether a label set with digest `have` may meet requirements `need`.
pub fn may_match(have: u64, need: u64) -> bool {
    have & need == need
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use kube_core::SelectorExt;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(pairs: &[(&str, &str)], expressions: &[(&str, &str, &[&str])]) -> Selector {
        let requirements = expressions
            .iter()
            .map(|(key, operator, values)| LabelSelectorRequirement {
                key: key.to_string(),
                operator: operator.to_string(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            })
            .collect();
        Selector::try_from(LabelSelector {
            match_labels: Some(labels(pairs)),
            match_expressions: Some(requirements),
        })
        .unwrap()
    }

    #[test]
    fn a_digest_never_rules_out_a_match() {
        let cases = [
            selector(&[("app", "web")], &[]),
            selector(&[("app", "web"), ("pod-template-hash", "abc")], &[]),
            selector(&[], &[("tier", "In", &["front"])]),
            selector(&[], &[("tier", "In", &["front", "back"])]),
            selector(&[], &[("tier", "Exists", &[])]),
            selector(
                &[],
                &[("tier", "NotIn", &["back"]), ("gone", "DoesNotExist", &[])],
            ),
        ];
        let pod = labels(&[
            ("app", "web"),
            ("pod-template-hash", "abc"),
            ("tier", "front"),
        ]);
        for case in cases {
            assert!(case.matches(&pod), "{case}");
            assert!(may_match(of_labels(&pod), required_by(&case)), "{case}");
        }
    }

    #[test]
    fn a_missing_pair_or_key_is_ruled_out() {
        let pod = of_labels(&labels(&[("app", "web"), ("tier", "front")]));
        let ruled_out = (0..200)
            .filter(|i| {
                let other = selector(&[("app", &format!("web-{i}"))], &[]);
                !may_match(pod, required_by(&other))
            })
            .count();
        // Two bits of 64 per entry: nearly every other workload is ruled out.
        assert!(ruled_out > 180, "{ruled_out} of 200 ruled out");
        let present_key = selector(&[], &[("tier", "Exists", &[])]);
        assert!(may_match(pod, required_by(&present_key)));
    }
}
