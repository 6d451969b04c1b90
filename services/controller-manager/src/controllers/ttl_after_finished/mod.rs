//! The TTL-after-finished controller: a Job that finished (Complete or
//! Failed) with `ttlSecondsAfterFinished` is deleted, with its pods in
//! the foreground, once that many seconds have passed since it finished.
//!
//! Wiring: the jobs' informer; a job that is finished and has a TTL is
//! queued, and queued again for the moment its TTL runs out.

mod sync;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use capstan_client::informer::InformerEvent;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::Job;

use crate::context::Context;
use crate::error::Result;
pub use sync::Syncer;

pub const ACCOUNT: &str = "ttl-after-finished-controller";
const QUEUE: &str = "ttl_jobs_to_delete";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let jobs = ctx.informers.get::<Job>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    jobs.add_handler(move |event: &InformerEvent<Job>| {
        let deleted = matches!(event, InformerEvent::Deleted(_));
        if !deleted && sync::needs_cleanup(event.object()) {
            q.add(event.key());
        }
    });
    if !ctx.until_synced(&[&jobs]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        jobs: jobs.store(),
        client,
        queue: Some(queue.clone()),
    });
    let workers = ctx.settings.concurrent_ttl_after_finished_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}
