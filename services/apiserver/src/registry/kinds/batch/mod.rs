//! batch/v1: Jobs and CronJobs.

mod cronjobs;
mod jobs;

use std::sync::Arc;

use crate::registry::Strategy;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(jobs::jobs()), Arc::new(cronjobs::cron_jobs())]
}
