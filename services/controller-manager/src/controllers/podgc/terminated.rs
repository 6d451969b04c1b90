//! Terminated pods past the threshold, kube's `gcTerminated`: the pods
//! to delete are the oldest beyond it, evicted ones first (they carry
//! least of interest), among those not already being deleted.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::pods;

/// The index of terminated pods (one value, [`TERMINATED`]).
pub const INDEX: &str = "terminated";
const TERMINATED: &str = "true";

pub fn is_terminated(pod: &Pod) -> bool {
    matches!(pods::phase(pod), "Succeeded" | "Failed")
}

pub fn index(pod: &Pod) -> Vec<String> {
    match is_terminated(pod) {
        true => vec![TERMINATED.to_string()],
        false => Vec::new(),
    }
}

pub fn value() -> &'static str {
    TERMINATED
}

fn evicted(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("Evicted")
}

/// Which of `terminated` to delete to keep at most `threshold`: none if
/// the threshold is off (zero or less).
pub fn excess(mut terminated: Vec<Arc<Pod>>, threshold: i64) -> Vec<Arc<Pod>> {
    let threshold = usize::try_from(threshold).unwrap_or(0);
    if threshold == 0 || terminated.len() <= threshold {
        return Vec::new();
    }
    let count = terminated.len() - threshold;
    terminated.retain(|p| !pods::is_terminating(p));
    terminated.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let name = |p: &Pod| (p.metadata.namespace.clone(), p.metadata.name.clone());
        (!evicted(a), created(a), name(a)).cmp(&(!evicted(b), created(b), name(b)))
    });
    terminated.truncate(count);
    terminated
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    fn pod(name: &str, created: &str, phase: &str, reason: Option<&str>) -> Arc<Pod> {
        Arc::new(object(json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
            "status": {"phase": phase, "reason": reason},
        })))
    }

    #[test]
    fn the_oldest_go_evicted_first_and_a_zero_threshold_keeps_all() {
        let pods = vec![
            pod("new", "2020-01-03T00:00:00Z", "Succeeded", None),
            pod("old", "2020-01-01T00:00:00Z", "Failed", None),
            pod("evicted", "2020-01-05T00:00:00Z", "Failed", Some("Evicted")),
            pod("mid", "2020-01-02T00:00:00Z", "Succeeded", None),
        ];
        let names = |list: Vec<Arc<Pod>>| -> Vec<String> {
            list.iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        };
        assert_eq!(names(excess(pods.clone(), 2)), ["evicted", "old"]);
        assert_eq!(names(excess(pods.clone(), 3)), ["evicted"]);
        assert!(excess(pods.clone(), 4).is_empty());
        assert!(excess(pods.clone(), 0).is_empty(), "off");
        assert!(is_terminated(&pods[0]) && index(&pods[1]) == ["true"]);
    }
}
