//! Pods holding the job-tracking finalizer with no Job left to count
//! them (the Job was deleted, or the pod is no longer its): the finalizer
//! is removed so they can go. The Job is looked up in the API, not the
//! cache, which may not have seen a Job that was just created.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::sync::Syncer;
use super::tracking::{has_finalizer, ORPHAN_PREFIX};
use crate::error::Result;
use crate::ownership::controller_of;

/// The queue key for an orphaned `pod`.
pub fn key(pod: &Pod) -> String {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    format!("{ORPHAN_PREFIX}{namespace}/{name}")
}

impl Syncer {
    /// Releases the pod `pod_key` (`namespace/name`) unless a live Job
    /// still owns it.
    pub(super) async fn release_orphan(&self, pod_key: &str) -> Result<()> {
        let Some(pod) = self.pods.get_by_key(pod_key) else {
            return Ok(());
        };
        if !has_finalizer(&pod) || self.still_owned(&pod).await? {
            return Ok(());
        }
        self.release(&[pod], &mut Default::default()).await
    }

    async fn still_owned(&self, pod: &Arc<Pod>) -> Result<bool> {
        let Some(owner) = controller_of(&pod.metadata).filter(|r| r.kind == "Job") else {
            return Ok(false);
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.control.client().clone(), namespace);
        let job = api.get_opt(&owner.name).await?;
        Ok(job.is_some_and(|j| j.metadata.uid.as_deref() == Some(owner.uid.as_str())))
    }
}
