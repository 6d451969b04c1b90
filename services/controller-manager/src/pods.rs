//! What the controllers read of a pod: whether it still counts (active),
//! is ready, has been ready long enough to be available, and when.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::chrono::{DateTime, Duration as ChronoDuration, Utc};

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Still running or about to: not Succeeded or Failed, not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// The Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the pod last became ready.
pub fn ready_since(pod: &Pod) -> Option<DateTime<Utc>> {
    let ready = condition(pod, "Ready").filter(|c| c.status == "True")?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

/// Ready for at least `min_ready_seconds` as of `now`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: DateTime<Utc>) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    match ready_since(pod) {
        Some(since) => since + ChronoDuration::seconds(min_ready_seconds.into()) <= now,
        None => false,
    }
}

/// How long until a ready pod becomes available, if it is ready and not
/// yet available: when to look again.
pub fn until_available(
    pod: &Pod,
    min_ready_seconds: i32,
    now: DateTime<Utc>,
) -> Option<std::time::Duration> {
    if min_ready_seconds <= 0 || !is_ready(pod) {
        return None;
    }
    let since = ready_since(pod)?;
    let at = since + ChronoDuration::seconds(min_ready_seconds.into());
    (at > now).then(|| (at - now).to_std().unwrap_or_default())
}

pub fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// The sum of its containers' restart counts.
pub fn restarts(pod: &Pod) -> i32 {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .sum()
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use serde_json::json;

    /// A pod in `phase`, Ready since `ready_at` if given.
    pub fn pod(name: &str, phase: &str, ready_at: Option<DateTime<Utc>>) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": phase},
        });
        if let Some(at) = ready_at {
            value["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
                "lastTransitionTime": at.to_rfc3339()}]);
        }
        serde_json::from_value(value).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::pod;
    use super::*;

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let now = Utc::now();
        let ready = pod("a", "Running", Some(now - ChronoDuration::seconds(5)));
        assert!(is_available(&ready, 0, now));
        assert!(is_available(&ready, 5, now));
        assert!(!is_available(&ready, 10, now));
        let wait = until_available(&ready, 10, now).unwrap();
        assert_eq!(wait.as_secs(), 5);
        assert!(!is_available(&pod("b", "Running", None), 0, now));
    }

    #[test]
    fn finished_and_terminating_pods_are_not_active() {
        assert!(is_active(&pod("a", "Pending", None)));
        assert!(!is_active(&pod("a", "Succeeded", None)));
        assert!(!is_active(&pod("a", "Failed", None)));
        let mut going = pod("a", "Running", None);
        going.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Utc::now()),
        );
        assert!(!is_active(&going));
    }
}
