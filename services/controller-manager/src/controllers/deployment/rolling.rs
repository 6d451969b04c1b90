//! RollingUpdate, kube's `rolling.go`: grow the new ReplicaSet within
//! maxSurge, shrink old ones within maxUnavailable (their unhealthy pods
//! first), and clean up history once the rollout completes.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::sync::{Sets, Syncer};
use super::util::{self, rs_replicas};
use crate::error::{Error, Result};

impl Syncer {
    pub async fn rollout_rolling(&self, d: &mut Deployment, sets: Vec<ReplicaSet>) -> Result<()> {
        let mut split = self.split(d, sets, true).await?;
        if self.reconcile_new(d, &mut split).await? {
            return self.sync_rollout_status(d, &split).await;
        }
        if self.reconcile_old(d, &mut split).await? {
            return self.sync_rollout_status(d, &split).await;
        }
        if util::deployment_complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &split.old).await?;
        }
        self.sync_rollout_status(d, &split).await
    }

    /// Scales the new ReplicaSet toward the desired count; true if it did.
    async fn reconcile_new(&self, d: &Deployment, split: &mut Sets) -> Result<bool> {
        let Some(new) = split.new.clone() else {
            return Ok(false);
        };
        let desired = util::replicas(d);
        let current = rs_replicas(&new);
        let target = match current.cmp(&desired) {
            std::cmp::Ordering::Equal => return Ok(false),
            std::cmp::Ordering::Greater => desired,
            std::cmp::Ordering::Less => util::new_rs_new_replicas(d, &split.all(), current),
        };
        if target == current {
            return Ok(false);
        }
        split.new = Some(self.scale_and_record(&new, target, d).await?);
        Ok(true)
    }

    /// Scales old ReplicaSets down as far as availability allows; true if
    /// any was.
    async fn reconcile_old(&self, d: &Deployment, split: &mut Sets) -> Result<bool> {
        let old_pods = util::spec_replicas(split.old.iter());
        if old_pods == 0 {
            return Ok(false);
        }
        let all_pods = util::spec_replicas(split.all().iter().copied());
        let min_available = util::replicas(d) - util::max_unavailable(d);
        let new_unavailable = split
            .new
            .as_ref()
            .map_or(0, |rs| rs_replicas(rs) - util::available(rs));
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.cleanup_unhealthy(d, split, max_scaled_down).await?;
        let scaled = self.scale_down_old(d, split).await?;
        Ok(cleaned + scaled > 0)
    }

    /// Scales old ReplicaSets down by their unavailable pods, oldest first.
    async fn cleanup_unhealthy(&self, d: &Deployment, split: &mut Sets, most: i32) -> Result<i32> {
        split.old.sort_by(util::creation_order);
        let mut total = 0;
        for rs in split.old.iter_mut() {
            if total >= most {
                break;
            }
            let replicas = rs_replicas(rs);
            let unhealthy = replicas - util::available(rs);
            if replicas == 0 || unhealthy <= 0 {
                continue;
            }
            let count = (most - total).min(unhealthy);
            *rs = self.scale_and_record(rs, replicas - count, d).await?;
            total += count;
        }
        Ok(total)
    }

    /// Scales old ReplicaSets down while more than the minimum is available.
    async fn scale_down_old(&self, d: &Deployment, split: &mut Sets) -> Result<i32> {
        let min_available = util::replicas(d) - util::max_unavailable(d);
        let available = util::available_replicas(split.all().iter().copied());
        if available <= min_available {
            return Ok(0);
        }
        let wanted = available - min_available;
        split.old.sort_by(util::creation_order);
        let mut total = 0;
        for rs in split.old.iter_mut() {
            if total >= wanted {
                break;
            }
            let replicas = rs_replicas(rs);
            if replicas == 0 {
                continue;
            }
            let count = replicas.min(wanted - total);
            if count < 0 {
                return Err(Error::Invalid(format!(
                    "invalid scale-down of {replicas} by {count}"
                )));
            }
            *rs = self.scale_and_record(rs, replicas - count, d).await?;
            total += count;
        }
        Ok(total)
    }
}
