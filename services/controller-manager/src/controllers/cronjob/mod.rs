//! The CronJob controller: starts a Job from `jobTemplate` at each time
//! `schedule` names (in `timeZone`), honouring suspend,
//! startingDeadlineSeconds, missed start times and concurrencyPolicy
//! (Allow, Forbid, Replace); keeps `status.active`, `lastScheduleTime` and
//! `lastSuccessfulTime`; deletes finished Jobs past the history limits.
//!
//! Wiring: cronjobs and jobs (indexed by controller UID). A CronJob's
//! events queue it; a Job's queue its CronJob; each sync queues the
//! CronJob again for its next start time.

mod history;
mod schedule;
mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::{key_from, InformerEvent};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::{CronJob, Job};

use crate::context::Context;
use crate::error::Result;
use crate::ownership::{self, controller_of, BY_CONTROLLER};
pub use sync::Syncer;

pub const ACCOUNT: &str = "cronjob-controller";
const QUEUE: &str = "cronjob";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let cronjobs = ctx.informers.get::<CronJob>();
    let jobs = ctx.informers.get::<Job>();
    jobs.add_index(BY_CONTROLLER, ownership::by_controller_uid::<Job>);
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    cronjobs.add_handler(move |event: &InformerEvent<CronJob>| {
        if !matches!(event, InformerEvent::Deleted(_)) {
            q.add(event.key());
        }
    });
    let q = queue.clone();
    jobs.add_handler(move |event: &InformerEvent<Job>| {
        let job = event.object();
        if let Some(owner) = controller_of(&job.metadata).filter(|r| r.kind == "CronJob") {
            q.add(key_from(job.metadata.namespace.as_deref(), &owner.name));
        }
    });
    if !ctx.until_synced(&[&cronjobs, &jobs]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        cronjobs: cronjobs.store(),
        jobs: jobs.store(),
        client,
        recorder,
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_cron_job_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
