//! A Job's conditions: SuccessCriteriaMet then Complete, FailureTarget
//! then Failed, Suspended.

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;

fn get<'a>(status: &'a JobStatus, kind: &str) -> Option<&'a JobCondition> {
    status.conditions.as_ref()?.iter().find(|c| c.type_ == kind)
}

/// The condition is there and True.
pub fn has(status: &JobStatus, kind: &str) -> bool {
    get(status, kind).is_some_and(|c| c.status == "True")
}

/// Complete or Failed: nothing more to do.
pub fn finished(job: &Job) -> bool {
    let status = job.status.clone().unwrap_or_default();
    has(&status, "Complete") || has(&status, "Failed")
}

pub fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

/// The failure already decided (FailureTarget), if any.
pub fn failure_target(status: &JobStatus) -> Option<(String, String)> {
    let c = get(status, "FailureTarget").filter(|c| c.status == "True")?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

fn put(status: &mut JobStatus, kind: &str, value: &str, reason: &str, message: &str) -> bool {
    if let Some(c) = get(status, kind) {
        if c.status == value && c.reason.as_deref() == Some(reason) {
            return false;
        }
    }
    let now = Some(Time(Utc::now()));
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != kind);
    conditions.push(JobCondition {
        type_: kind.into(),
        status: value.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: now.clone(),
        last_transition_time: now,
    });
    true
}

/// Sets the condition True; false if it already was, with this reason.
pub fn set_condition(status: &mut JobStatus, kind: &str, reason: &str, message: &str) -> bool {
    put(status, kind, "True", reason, message)
}

pub fn set_false(status: &mut JobStatus, kind: &str, reason: &str, message: &str) -> bool {
    put(status, kind, "False", reason, message)
}
