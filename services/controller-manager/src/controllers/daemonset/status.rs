//! A DaemonSet's status as kube computes it, node by node: desired
//! (nodes that should run it), current (those with a pod), misscheduled
//! (pods where none should be), and of the oldest pod on each desired
//! node whether it is ready, available and at the current revision.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::chrono::{DateTime, Utc};

use super::plan::NodePods;
use crate::history::CONTROLLER_REVISION_HASH;
use crate::pods;

pub fn calculate(
    ds: &DaemonSet,
    nodes: &[NodePods],
    hash: &str,
    collision_count: i32,
    now: DateTime<Utc>,
) -> DaemonSetStatus {
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let mut status = DaemonSetStatus {
        observed_generation: ds.metadata.generation,
        collision_count: Some(collision_count),
        conditions: ds.status.as_ref().and_then(|s| s.conditions.clone()),
        ..DaemonSetStatus::default()
    };
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for node in nodes {
        let mut live: Vec<_> = node
            .pods
            .iter()
            .filter(|p| !pods::is_terminating(p))
            .collect();
        live.sort_by_key(|p| p.metadata.creation_timestamp.clone());
        match (node.fit.should_run, live.first()) {
            (true, first) => {
                status.desired_number_scheduled += 1;
                let Some(pod) = first else { continue };
                status.current_number_scheduled += 1;
                ready += i32::from(pods::is_ready(pod));
                available += i32::from(pods::is_available(pod, min_ready, now));
                let labels = pod.metadata.labels.as_ref();
                let revision = labels.and_then(|l| l.get(CONTROLLER_REVISION_HASH));
                updated += i32::from(revision.map(String::as_str) == Some(hash));
            }
            (false, Some(_)) => status.number_misscheduled += 1,
            (false, None) => {}
        }
    }
    status.number_ready = ready;
    status.number_available = Some(available);
    status.updated_number_scheduled = Some(updated);
    status.number_unavailable = Some(status.desired_number_scheduled - available);
    status
}

pub fn needs_update(ds: &DaemonSet, status: &DaemonSetStatus) -> bool {
    let stored = ds.status.clone().unwrap_or_default();
    let zero = |v: Option<i32>| v.unwrap_or(0);
    stored.desired_number_scheduled != status.desired_number_scheduled
        || stored.current_number_scheduled != status.current_number_scheduled
        || stored.number_misscheduled != status.number_misscheduled
        || stored.number_ready != status.number_ready
        || zero(stored.number_available) != zero(status.number_available)
        || zero(stored.updated_number_scheduled) != zero(status.updated_number_scheduled)
        || zero(stored.number_unavailable) != zero(status.number_unavailable)
        || zero(stored.collision_count) != zero(status.collision_count)
        || stored.observed_generation != status.observed_generation
}
