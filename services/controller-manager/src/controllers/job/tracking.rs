//! What the job controller marks its pods with and how it sorts them:
//! shared by the sync, the pod bookkeeping and the orphan release, below
//! all three.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// Queue keys of orphaned pods start with this (no object name can).
pub const ORPHAN_PREFIX: &str = "pod:";

/// Held by every pod of a Job until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// The pods of one job, sorted by what they mean for it.
#[derive(Default)]
pub struct Pods {
    pub active: Vec<Arc<Pod>>,
    pub terminating: usize,
    /// Finished and still holding the finalizer.
    pub finished: Vec<Arc<Pod>>,
    /// Every pod, for indexes and backoff.
    pub all: Vec<Arc<Pod>>,
}

pub fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}
