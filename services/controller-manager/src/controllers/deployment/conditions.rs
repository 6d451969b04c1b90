//! The Deployment's status conditions (Available, Progressing,
//! ReplicaFailure): their names and how one is set, read and removed.

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;

pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";

/// A condition stamped now.
pub fn condition(kind: &str, status: &str, reason: &str, message: String) -> DeploymentCondition {
    let now = Some(Time(Utc::now()));
    DeploymentCondition {
        type_: kind.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: now.clone(),
        last_transition_time: now,
    }
}

pub fn get<'a>(status: &'a DeploymentStatus, kind: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.as_ref()?.iter().find(|c| c.type_ == kind)
}

/// kube's `SetDeploymentCondition`: the same status and reason changes
/// nothing; the same status keeps its transition time.
pub fn set(status: &mut DeploymentStatus, mut new: DeploymentCondition) {
    if let Some(current) = get(status, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove(status, &new.type_);
    status.conditions.get_or_insert_with(Vec::new).push(new);
}

pub fn remove(status: &mut DeploymentStatus, kind: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != kind);
    }
}
