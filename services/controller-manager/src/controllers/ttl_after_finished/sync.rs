//! One Job's TTL, kube's `processJob`: not yet expired, look again when it
//! will be; expired in the cache, read the Job again from the API (its
//! TTL may have been changed or removed since) and, still expired, delete
//! it in the foreground, conditional on the version just read.

use std::time::Duration;

use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};

use crate::context::Reconciler;
use crate::error::{Error, Result};

pub struct Syncer {
    pub jobs: Store<Job>,
    pub client: kube::Client,
    /// For the look again when a TTL runs out (none in unit tests).
    pub queue: Option<WorkQueue<String>>,
}

/// Finished with a TTL and not already being deleted.
pub fn needs_cleanup(job: &Job) -> bool {
    ttl(job).is_some() && finished_at(job).is_some() && job.metadata.deletion_timestamp.is_none()
}

fn ttl(job: &Job) -> Option<i32> {
    job.spec.as_ref()?.ttl_seconds_after_finished
}

/// When the Job's Complete or Failed condition became True.
fn finished_at(job: &Job) -> Option<DateTime<Utc>> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// How long until the Job expires (zero once it has); None if it never
/// will (no TTL, not finished, already going).
pub fn time_left(job: &Job, now: DateTime<Utc>) -> Option<Duration> {
    if !needs_cleanup(job) {
        return None;
    }
    let expiry = finished_at(job)? + k8s_openapi::chrono::Duration::seconds(ttl(job)?.into());
    Some((expiry - now).to_std().unwrap_or_default())
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(cached) = self.jobs.get_by_key(key) else {
            return Ok(());
        };
        if !self.expired(key, &cached) {
            return Ok(());
        }
        let namespace = cached.metadata.namespace.as_deref().unwrap_or_default();
        let name = cached.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let Some(fresh) = api.get_opt(name).await? else {
            return Ok(());
        };
        if !self.expired(key, &fresh) {
            return Ok(());
        }
        tracing::info!(job = key, "cleaning up a finished Job past its TTL");
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: fresh.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await.map_err(Error::from) {
            Ok(_) => Ok(()),
            Err(err) if err.is_not_found() => Ok(()),
            Err(err) => Err(err),
        }
    }
}

impl Syncer {
    /// True if `job` has expired; if it will, looks again then.
    fn expired(&self, key: &str, job: &Job) -> bool {
        match time_left(job, Utc::now()) {
            None => false,
            Some(left) if left.is_zero() => true,
            Some(left) => {
                if let Some(queue) = &self.queue {
                    queue.add_after(key.to_string(), left);
                }
                false
            }
        }
    }
}
