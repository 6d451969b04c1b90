//! Recreate, kube's `recreate.go`: scale every old ReplicaSet to zero,
//! wait until none of their pods runs, then scale the new one up.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::Syncer;
use super::util::{self, rs_replicas};
use crate::error::Result;
use crate::pods;

impl Syncer {
    pub async fn rollout_recreate(&self, d: &mut Deployment, sets: Vec<ReplicaSet>) -> Result<()> {
        let mut split = self.split(d, sets.clone(), false).await?;
        let mut scaled_down = false;
        for rs in split.old.iter_mut().filter(|rs| rs_replicas(rs) > 0) {
            *rs = self.scale_and_record(rs, 0, d).await?;
            scaled_down = true;
        }
        if scaled_down || self.old_pods_running(&split.old) {
            return self.sync_rollout_status(d, &split).await;
        }
        if split.new.is_none() {
            split = self.split(d, sets, true).await?;
        }
        if let Some(new) = split.new.clone() {
            split.new = Some(self.scale_and_record(&new, util::replicas(d), d).await?);
        }
        if util::deployment_complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &split.old).await?;
        }
        self.sync_rollout_status(d, &split).await
    }

    /// Whether an old ReplicaSet still has a pod that has not finished
    /// (a terminating one counts: it may still be running).
    fn old_pods_running(&self, old: &[ReplicaSet]) -> bool {
        if util::actual_replicas(old.iter()) > 0 {
            return true;
        }
        let sets: Vec<&ReplicaSet> = old.iter().collect();
        self.pods_of(&sets)
            .iter()
            .any(|p| !matches!(pods::phase(p), "Succeeded" | "Failed"))
    }
}
