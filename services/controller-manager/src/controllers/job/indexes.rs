//! Completion indexes as kube writes them in `status.completedIndexes` and
//! `status.failedIndexes`: sorted, runs compressed (`0-2,4,7-9`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

/// The annotation and label holding a pod's completion index.
pub const INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The pod annotation counting the failures of its index so far.
pub const INDEX_FAILURES: &str = "batch.kubernetes.io/job-index-failure-count";

pub fn parse(text: Option<&str>) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in text
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
    {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    set.extend(a..=b);
                }
            }
            None => {
                if let Ok(n) = part.parse() {
                    set.insert(n);
                }
            }
        }
    }
    set
}

pub fn format(set: &BTreeSet<i32>) -> Option<String> {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &n in set {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    let parts: Vec<String> = runs
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// A pod's completion index, if it has a valid one.
pub fn of(pod: &Pod) -> Option<i32> {
    annotation(pod, INDEX).and_then(|i| i.parse().ok())
}

/// How many times the pod's index failed before it was made.
pub fn failures_before(pod: &Pod) -> i32 {
    annotation(pod, INDEX_FAILURES)
        .and_then(|i| i.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_compress_and_expand() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 7, 8, 9].into();
        assert_eq!(format(&set).as_deref(), Some("0-2,4,7-9"));
        assert_eq!(parse(Some("0-2,4,7-9")), set);
        assert_eq!(format(&BTreeSet::new()), None);
        assert!(parse(None).is_empty());
    }
}
