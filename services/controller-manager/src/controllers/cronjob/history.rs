//! A CronJob's Jobs: which are finished and how, the start time each was
//! made for, the Job made for a start time, and the finished Jobs past
//! the history limits.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::chrono::{DateTime, Utc};

/// The annotation holding the start time a Job was made for.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// "Complete" or "Failed" once the Job finished.
pub fn finished(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find_map(|c| match (c.type_.as_str(), c.status.as_str()) {
            ("Complete", "True") => Some("Complete"),
            ("Failed", "True") => Some("Failed"),
            _ => None,
        })
}

/// kube's Job name for a start time: the CronJob's name and the start
/// in minutes since the epoch, so a start is made at most once.
pub fn job_name(cronjob: &CronJob, scheduled: DateTime<Utc>) -> String {
    let name = cronjob.metadata.name.as_deref().unwrap_or_default();
    format!("{name}-{}", scheduled.timestamp() / 60)
}

/// The Jobs to delete: finished ones beyond the limits, oldest first.
pub fn past_limits(cronjob: &CronJob, jobs: &[Arc<Job>]) -> Vec<Arc<Job>> {
    let spec = cronjob.spec.as_ref();
    let keep_succeeded = spec
        .and_then(|s| s.successful_jobs_history_limit)
        .unwrap_or(3);
    let keep_failed = spec.and_then(|s| s.failed_jobs_history_limit).unwrap_or(1);
    let mut doomed = Vec::new();
    for (outcome, keep) in [("Complete", keep_succeeded), ("Failed", keep_failed)] {
        let mut finished: Vec<Arc<Job>> = jobs
            .iter()
            .filter(|j| finished(j) == Some(outcome))
            .cloned()
            .collect();
        finished.sort_by_key(|j| started(j));
        let excess = finished.len().saturating_sub(keep.max(0) as usize);
        doomed.extend(finished.into_iter().take(excess));
    }
    doomed
}

fn started(job: &Job) -> Option<DateTime<Utc>> {
    let status = job.status.as_ref();
    status
        .and_then(|s| s.start_time.as_ref())
        .or(job.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
}
