//! A ReplicaSet's status as kube computes it: pods counted, fully
//! labelled, ready, available (ready for minReadySeconds), the generation
//! observed, and the ReplicaFailure condition while creating or deleting
//! pods fails.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::{DateTime, Utc};

use super::kind::Replicated;
use crate::pods;

pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Why the last attempt to create or delete pods failed.
pub struct Failure {
    pub creating: bool,
    pub message: String,
}

pub fn calculate<K: Replicated>(
    owner: &K,
    pods: &[Arc<Pod>],
    failure: Option<&Failure>,
    now: DateTime<Utc>,
) -> ReplicaSetStatus {
    let template_labels = owner
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            template_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = pods.iter().filter(|p| pods::is_ready(p)).count();
    let min_ready = owner.min_ready_seconds();
    let available = pods
        .iter()
        .filter(|p| pods::is_available(p, min_ready, now))
        .count();
    let previous = owner.status();
    let conditions = conditions(previous.conditions.unwrap_or_default(), failure, now);
    normalized(ReplicaSetStatus {
        replicas: pods.len() as i32,
        fully_labeled_replicas: Some(fully_labeled as i32),
        ready_replicas: Some(ready as i32),
        available_replicas: Some(available as i32),
        observed_generation: owner.meta().generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
    })
}

/// Zero counts absent, as kube's JSON omits them: the form compared with
/// what is stored, so an unchanged status is never written again.
fn normalized(mut status: ReplicaSetStatus) -> ReplicaSetStatus {
    for field in [
        &mut status.fully_labeled_replicas,
        &mut status.ready_replicas,
        &mut status.available_replicas,
    ] {
        if *field == Some(0) {
            *field = None;
        }
    }
    if status.conditions.as_ref().is_some_and(|c| c.is_empty()) {
        status.conditions = None;
    }
    status
}

/// The ReplicaFailure condition is set while a write fails (kept as it
/// was if already set) and removed once one succeeds.
fn conditions(
    mut current: Vec<ReplicaSetCondition>,
    failure: Option<&Failure>,
    now: DateTime<Utc>,
) -> Vec<ReplicaSetCondition> {
    let has = current.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match failure {
        Some(failure) if !has => current.push(ReplicaSetCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(
                if failure.creating {
                    "FailedCreate"
                } else {
                    "FailedDelete"
                }
                .into(),
            ),
            message: Some(failure.message.clone()),
            last_transition_time: Some(Time(now)),
        }),
        None if has => current.retain(|c| c.type_ != REPLICA_FAILURE),
        _ => {}
    }
    current
}

/// Whether `status` differs from what is stored.
pub fn needs_update<K: Replicated>(owner: &K, status: &ReplicaSetStatus) -> bool {
    normalized(owner.status()) != *status
}
