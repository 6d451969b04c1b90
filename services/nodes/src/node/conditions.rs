//! The node conditions a healthy kubelet reports, and when a lease-based
//! kubelet reports its status at all: on a change, else only every
//! `nodeStatusReportFrequency` (5 minutes), since the Lease carries
//! liveness.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::clock::{after, whole_seconds};

/// The kubelet's `nodeStatusReportFrequency` default.
pub const REPORT_EVERY: Duration = Duration::from_secs(300);

const HEALTHY: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// A healthy node's conditions at `now`, each keeping its transition time
/// from `previous` while its status stays.
pub fn conditions(previous: &[NodeCondition], now: DateTime<Utc>) -> Vec<NodeCondition> {
    let now = Time(whole_seconds(now));
    HEALTHY
        .iter()
        .map(|(kind, status, reason, message)| {
            let since = previous
                .iter()
                .find(|c| c.type_ == *kind && c.status == *status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            NodeCondition {
                type_: kind.to_string(),
                status: status.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(since),
            }
        })
        .collect()
}

/// Whether `new` must be written over `old`: something besides the
/// heartbeat times changed, or the last report is `REPORT_EVERY` old.
pub fn must_report(old: Option<&NodeStatus>, new: &NodeStatus, now: DateTime<Utc>) -> bool {
    let Some(old) = old else {
        return true;
    };
    let last_heartbeat = old
        .conditions
        .iter()
        .flatten()
        .filter_map(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0)
        .max();
    let stale = last_heartbeat.is_none_or(|at| after(at, REPORT_EVERY) <= now);
    stale || without_heartbeats(old) != without_heartbeats(new)
}

fn without_heartbeats(status: &NodeStatus) -> NodeStatus {
    let mut status = status.clone();
    for c in status.conditions.iter_mut().flatten() {
        c.last_heartbeat_time = None;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-03-01T10:00:00Z")
            .unwrap()
            .to_utc()
            + TimeDelta::seconds(seconds)
    }

    fn status(conditions: Vec<NodeCondition>) -> NodeStatus {
        NodeStatus {
            conditions: Some(conditions),
            ..NodeStatus::default()
        }
    }

    #[test]
    fn transition_times_stay_and_heartbeats_move() {
        let first = conditions(&[], at(0));
        let later = conditions(&first, at(60));
        let ready = later.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time, Some(Time(at(0))));
        assert_eq!(ready.last_heartbeat_time, Some(Time(at(60))));
    }

    #[test]
    fn the_status_is_reported_on_change_or_every_five_minutes() {
        let old = status(conditions(&[], at(0)));
        let same = status(conditions(old.conditions.as_ref().unwrap(), at(60)));
        assert!(!must_report(Some(&old), &same, at(60)));
        assert!(must_report(Some(&old), &same, at(300)));
        let mut changed = same.clone();
        changed.images = Some(vec![]);
        assert!(must_report(Some(&old), &changed, at(60)));
        assert!(must_report(None, &same, at(60)));
    }
}
