//! A deployment's status and conditions, kube's `progress.go` and
//! `calculateStatus`: counts summed over its ReplicaSets, Available from
//! maxUnavailable, Progressing (NewReplicaSetAvailable, ReplicaSetUpdated,
//! ProgressDeadlineExceeded, DeploymentPaused/Resumed) against
//! progressDeadlineSeconds, and ReplicaFailure carried up from a
//! ReplicaSet that cannot make its pods.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};

use super::conditions::{
    condition, get, remove, set, AVAILABLE, NEW_RS_AVAILABLE, PAUSED, PROGRESSING, REPLICA_FAILURE,
    RESUMED, TIMED_OUT,
};
use super::sync::{Sets, Syncer};
use super::util;
use crate::error::Result;

/// kube's `calculateStatus`.
pub fn calculate(d: &Deployment, sets: &Sets) -> DeploymentStatus {
    let all = sets.all();
    let available = util::available_replicas(all.iter().copied());
    let total = util::spec_replicas(all.iter().copied());
    let previous = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(util::actual_replicas(all.iter().copied())),
        updated_replicas: Some(util::actual_replicas(sets.new.iter())),
        ready_replicas: Some(util::ready_replicas(all.iter().copied())),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: previous.collision_count,
        conditions: previous.conditions,
    };
    let minimum = available >= util::replicas(d) - util::max_unavailable(d);
    let availability = match minimum {
        true => condition(
            AVAILABLE,
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
        ),
        false => condition(
            AVAILABLE,
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
        ),
    };
    set(&mut status, availability);
    status
}

/// Zero counts absent, as kube's JSON omits them, so a status equal to
/// the stored one compares equal and is not written again.
fn normalized(mut status: DeploymentStatus) -> DeploymentStatus {
    for field in [
        &mut status.replicas,
        &mut status.updated_replicas,
        &mut status.ready_replicas,
        &mut status.available_replicas,
        &mut status.unavailable_replicas,
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

fn unchanged(d: &Deployment, status: &DeploymentStatus) -> bool {
    normalized(d.status.clone().unwrap_or_default()) == normalized(status.clone())
}

fn judge_progress(
    d: &Deployment,
    previous: &DeploymentStatus,
    current: Option<&DeploymentCondition>,
    sets: &Sets,
    status: &mut DeploymentStatus,
) {
    let subject = match &sets.new {
        Some(rs) => format!(
            "ReplicaSet {:?}",
            rs.metadata.name.as_deref().unwrap_or_default()
        ),
        None => format!(
            "Deployment {:?}",
            d.metadata.name.as_deref().unwrap_or_default()
        ),
    };
    if util::deployment_complete(d, status) {
        let message = format!("{subject} has successfully progressed.");
        set(
            status,
            condition(PROGRESSING, "True", NEW_RS_AVAILABLE, message),
        );
    } else if progressing(previous, status) {
        let mut updated = condition(
            PROGRESSING,
            "True",
            "ReplicaSetUpdated",
            format!("{subject} is progressing."),
        );
        if let Some(current) = current {
            if current.status == "True" {
                updated.last_transition_time = current.last_transition_time.clone();
            }
            remove(status, PROGRESSING);
        }
        set(status, updated);
    } else if timed_out(d, status) {
        let message = format!("{subject} has timed out progressing.");
        set(status, condition(PROGRESSING, "False", TIMED_OUT, message));
    }
}

/// More pods updated, fewer old ones, or more ready or available.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// The last progress is older than the deadline.
fn timed_out(d: &Deployment, status: &DeploymentStatus) -> bool {
    let (Some(deadline), Some(current)) = (util::progress_deadline(d), get(status, PROGRESSING))
    else {
        return false;
    };
    match current.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => current
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + ChronoDuration::seconds(deadline.into()) < Utc::now()),
    }
}

/// Looks again when the deadline would pass, so a stuck rollout is
/// reported even if nothing else happens.
fn requeue_stuck(syncer: &Syncer, d: &Deployment, status: &DeploymentStatus) {
    let (Some(queue), Some(deadline)) = (&syncer.queue, util::progress_deadline(d)) else {
        return;
    };
    let Some(current) = get(status, PROGRESSING) else {
        return;
    };
    if util::deployment_complete(d, status) || timed_out(d, status) {
        return;
    }
    let Some(updated) = current.last_update_time.as_ref() else {
        return;
    };
    let due = updated.0 + ChronoDuration::seconds(deadline.into()) - Utc::now();
    let after = due.to_std().unwrap_or_default() + Duration::from_secs(1);
    queue.add_after(capstan_client::informer::key_of(d), after);
}

/// The ReplicaFailure of the new ReplicaSet, else of any old one.
fn replica_failure(sets: &Sets) -> Option<DeploymentCondition> {
    let failing = |rs: &k8s_openapi::api::apps::v1::ReplicaSet| {
        let conditions = rs.status.as_ref()?.conditions.as_ref()?;
        let failure = conditions.iter().find(|c| c.type_ == REPLICA_FAILURE)?;
        Some(DeploymentCondition {
            type_: REPLICA_FAILURE.into(),
            status: failure.status.clone(),
            reason: failure.reason.clone(),
            message: failure.message.clone(),
            last_update_time: failure.last_transition_time.clone(),
            last_transition_time: failure.last_transition_time.clone(),
        })
    };
    sets.new
        .as_ref()
        .and_then(failing)
        .or_else(|| sets.old.iter().find_map(failing))
}

impl Syncer {
    /// kube's `syncDeploymentStatus`: counts and Available only.
    pub(super) async fn sync_status(&self, d: &mut Deployment, sets: &Sets) -> Result<()> {
        let status = calculate(d, sets);
        if unchanged(d, &status) {
            return Ok(());
        }
        self.write_status(d, normalized(status)).await
    }

    /// kube's `syncRolloutStatus`: the status with the Progressing condition
    /// judged against the progress deadline, and the ReplicaFailure carried up.
    pub(super) async fn sync_rollout_status(&self, d: &mut Deployment, sets: &Sets) -> Result<()> {
        let mut status = calculate(d, sets);
        let deadline = util::progress_deadline(d);
        if deadline.is_none() {
            remove(&mut status, PROGRESSING);
        }
        let previous = d.status.clone().unwrap_or_default();
        let current = get(&previous, PROGRESSING).cloned();
        let complete_before = status.replicas == status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
        if deadline.is_some() && !complete_before {
            judge_progress(d, &previous, current.as_ref(), sets, &mut status);
        }
        match replica_failure(sets) {
            Some(failure) => set(&mut status, failure),
            None => remove(&mut status, REPLICA_FAILURE),
        }
        if unchanged(d, &status) {
            requeue_stuck(self, d, &status);
            return Ok(());
        }
        self.write_status(d, normalized(status)).await
    }

    /// kube's `checkPausedConditions`: Progressing Unknown while paused, so a
    /// resumed rollout is not judged against a stale deadline.
    pub(super) async fn check_paused(&self, d: &mut Deployment) -> Result<()> {
        if util::progress_deadline(d).is_none() {
            return Ok(());
        }
        let mut status = d.status.clone().unwrap_or_default();
        let reason = get(&status, PROGRESSING).and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(TIMED_OUT) {
            return Ok(());
        }
        let paused_shown = reason.as_deref() == Some(PAUSED);
        let change = match (util::is_paused(d), paused_shown) {
            (true, false) => condition(
                PROGRESSING,
                "Unknown",
                PAUSED,
                "Deployment is paused".into(),
            ),
            (false, true) => condition(
                PROGRESSING,
                "Unknown",
                RESUMED,
                "Deployment is resumed".into(),
            ),
            _ => return Ok(()),
        };
        set(&mut status, change);
        self.write_status(d, status).await
    }
}
