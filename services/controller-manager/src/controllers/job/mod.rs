//! The Job controller: runs pods to completion, `parallelism` at a time,
//! counting each finished pod exactly once through the job-tracking
//! finalizer; Indexed jobs give each pod its completion index; failures
//! count against backoffLimit (or the index's backoffLimitPerIndex) as
//! the podFailurePolicy says, with kube's backoff before a replacement;
//! activeDeadlineSeconds and suspend are honoured.
//!
//! Wiring: jobs and the shared pods' informer (indexed by controller
//! UID). A job's events enqueue it; a pod's enqueue its job and settle
//! the job's expectations.

mod conditions;
mod failure;
mod indexes;
mod orphans;
mod pods;
pub mod sync;
#[cfg(test)]
mod tests;
mod tracking;

use std::sync::Arc;

use capstan_client::informer::{key_from, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::context::Context;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::ownership::controller_of;
use crate::pod_control::PodControl;
use sync::Syncer;

pub const ACCOUNT: &str = "job-controller";
const QUEUE: &str = "job";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let jobs = ctx.informers.get::<Job>();
    let pods = super::replicaset::index_pods(&ctx);
    let queue = WorkQueue::<String>::new(QUEUE);
    let expectations = Expectations::new();
    let (q, e) = (queue.clone(), expectations.clone());
    jobs.add_handler(move |event: &InformerEvent<Job>| {
        if let InformerEvent::Deleted(_) = event {
            e.forget(&event.key());
        }
        q.add(event.key());
    });
    let (q, e, store) = (queue.clone(), expectations.clone(), jobs.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| on_pod(&store, &e, &q, event));
    if !ctx.until_synced(&[&jobs, &pods]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        jobs: jobs.store(),
        pods: pods.store(),
        expectations,
        control: PodControl::new(client, recorder),
        queue: Some(queue.clone()),
        written: Default::default(),
    });
    let workers = ctx.settings.concurrent_job_syncs;
    ctx.serve(QUEUE, queue, workers, syncer).await;
    Ok(())
}

/// A pod's job learns of it; a new pod or a pod going settles the job's
/// expectations. A pod holding the tracking finalizer with no job in the
/// cache is queued as an orphan, to be let go.
fn on_pod(
    jobs: &Store<Job>,
    expectations: &Expectations,
    queue: &WorkQueue<String>,
    event: &InformerEvent<Pod>,
) {
    let pod = event.object();
    let owner = controller_of(&pod.metadata).filter(|r| r.kind == "Job");
    let key = owner.map(|r| key_from(pod.metadata.namespace.as_deref(), &r.name));
    let ours = owner.zip(key.as_ref()).is_some_and(|(r, key)| {
        jobs.get_by_key(key)
            .is_some_and(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()))
    });
    let (Some(key), true) = (key, ours) else {
        if tracking::has_finalizer(pod) && !matches!(event, InformerEvent::Deleted(_)) {
            queue.add(orphans::key(pod));
        }
        return;
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    match event {
        InformerEvent::Added(p) if p.metadata.deletion_timestamp.is_none() => {
            expectations.creation_observed(&key)
        }
        InformerEvent::Deleted(_) => expectations.deletion_observed(&key, &uid),
        InformerEvent::Updated { new, .. } if new.metadata.deletion_timestamp.is_some() => {
            expectations.deletion_observed(&key, &uid)
        }
        _ => {}
    }
    queue.add(key);
}
