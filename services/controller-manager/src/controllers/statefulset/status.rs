//! A StatefulSet's status as kube computes it from its pods: counts
//! (created, ready, available, at the current and at the update
//! revision), both revisions' names, the generation observed and the
//! collision count; a rolling update whose pods are all updated and
//! ready makes the update revision current.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

use super::identity::revision_of;
use super::revisions::SetRevisions;
use crate::pods;

pub fn calculate(
    set: &StatefulSet,
    set_pods: &[(i32, Arc<Pod>)],
    revisions: &SetRevisions,
    collision_count: i32,
    now: DateTime<Utc>,
) -> StatefulSetStatus {
    let min_ready = set
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let running_ready = |p: &Pod| pods::phase(p) == "Running" && pods::is_ready(p);
    let count = |f: &dyn Fn(&Pod) -> bool| set_pods.iter().filter(|(_, p)| f(p)).count() as i32;
    let at =
        |revision: &str| count(&|p: &Pod| !pods::is_terminating(p) && revision_of(p) == revision);
    let mut status = StatefulSetStatus {
        replicas: set_pods.len() as i32,
        ready_replicas: Some(count(&running_ready)),
        available_replicas: Some(count(&|p: &Pod| {
            running_ready(p) && pods::is_available(p, min_ready, now)
        })),
        current_replicas: Some(at(revisions.current_name())),
        updated_replicas: Some(at(revisions.update_name())),
        current_revision: Some(revisions.current_name().to_string()),
        update_revision: Some(revisions.update_name().to_string()),
        observed_generation: set.metadata.generation,
        collision_count: Some(collision_count),
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
    };
    let rolling = set
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        != Some("OnDelete");
    let everyone_updated = status.updated_replicas == Some(status.replicas)
        && status.ready_replicas == Some(status.replicas);
    if rolling && everyone_updated {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
    status
}

/// Whether `status` differs from what is stored.
pub fn needs_update(set: &StatefulSet, status: &StatefulSetStatus) -> bool {
    let stored = set.status.clone().unwrap_or_default();
    let zero = |v: Option<i32>| v.unwrap_or(0);
    stored.replicas != status.replicas
        || zero(stored.ready_replicas) != zero(status.ready_replicas)
        || zero(stored.available_replicas) != zero(status.available_replicas)
        || zero(stored.current_replicas) != zero(status.current_replicas)
        || zero(stored.updated_replicas) != zero(status.updated_replicas)
        || zero(stored.collision_count) != zero(status.collision_count)
        || stored.current_revision != status.current_revision
        || stored.update_revision != status.update_revision
        || stored.observed_generation != status.observed_generation
}
