//! Scaling a deployment's ReplicaSets, kube's `sync.go`: a change of
//! `spec.replicas` (or a paused deployment) is spread over the active
//! ReplicaSets in proportion to their size, within maxSurge; and old
//! ReplicaSets past revisionHistoryLimit are deleted.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, DeleteParams};

use super::sync::{Sets, Syncer};
use super::util::{self, rs_replicas};
use crate::error::{Error, Result};
use capstan_client::events::EventType;

fn active(sets: &[&ReplicaSet]) -> Vec<String> {
    sets.iter()
        .filter(|rs| rs_replicas(rs) > 0)
        .filter_map(|rs| rs.metadata.name.clone())
        .collect()
}

impl Syncer {
    /// A ReplicaSet's desired-replicas annotation disagrees with the
    /// deployment's replicas: the user scaled, not rolled.
    pub async fn is_scaling_event(&self, d: &mut Deployment, sets: &[ReplicaSet]) -> Result<bool> {
        let split = self.split(d, sets.to_vec(), false).await?;
        let desired = util::replicas(d);
        Ok(split
            .all()
            .iter()
            .filter(|rs| rs_replicas(rs) > 0)
            .any(|rs| {
                let annotated = util::annotation(&rs.metadata, util::DESIRED_REPLICAS);
                annotated
                    .and_then(|v| v.parse::<i32>().ok())
                    .is_some_and(|v| v != desired)
            }))
    }

    /// kube's `sync`: scale, clean up a paused deployment's history,
    /// write the status.
    pub async fn sync_scale(&self, d: &mut Deployment, sets: Vec<ReplicaSet>) -> Result<()> {
        let mut split = self.split(d, sets, false).await?;
        self.scale(d, &mut split).await?;
        if util::is_paused(d) {
            self.cleanup(d, &split.old).await?;
        }
        self.sync_status(d, &split).await
    }

    async fn scale(&self, d: &Deployment, split: &mut Sets) -> Result<()> {
        let desired = util::replicas(d);
        if let Some(target) = active_or_latest(split) {
            let rs = find_mut(split, &target)
                .ok_or_else(|| Error::Invalid("lost a replica set".into()))?;
            if rs_replicas(rs) != desired {
                *rs = self.scale_and_record(rs, desired, d).await?;
            }
            return Ok(());
        }
        if util::is_saturated(d, split.new.as_ref()) {
            for rs in split.old.iter_mut().filter(|rs| rs_replicas(rs) > 0) {
                *rs = self.scale_and_record(rs, 0, d).await?;
            }
            return Ok(());
        }
        if util::is_rolling_update(d) {
            self.scale_proportionally(d, split).await?;
        }
        Ok(())
    }

    /// Spreads the difference between the allowed size and the current
    /// total over the active ReplicaSets by their share, largest first.
    async fn scale_proportionally(&self, d: &Deployment, split: &mut Sets) -> Result<()> {
        let desired = util::replicas(d);
        let all = split.all();
        let names = active(&all);
        let mut sets: Vec<ReplicaSet> = all
            .iter()
            .filter(|rs| rs.metadata.name.as_ref().is_some_and(|n| names.contains(n)))
            .map(|rs| (*rs).clone())
            .collect();
        let current = util::spec_replicas(sets.iter());
        let allowed = if desired > 0 {
            desired + util::max_surge(d)
        } else {
            0
        };
        let to_add = allowed - current;
        let operation = if to_add > 0 { "up" } else { "down" };
        sets.sort_by(|a, b| by_size(a, b, to_add > 0));
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(sets.len());
        for rs in &sets {
            let share = match to_add {
                0 => 0,
                _ => proportion(rs, d, to_add, added),
            };
            sizes.push(rs_replicas(rs) + share);
            added += share;
        }
        if let Some(first) = sizes.first_mut() {
            if to_add != 0 {
                *first = (*first + to_add - added).max(0);
            }
        }
        for (rs, size) in sets.iter().zip(sizes) {
            let scaled = self.scale_rs(rs, size, d, operation).await?;
            if let Some(slot) = find_mut(split, rs.metadata.name.as_deref().unwrap_or_default()) {
                *slot = scaled;
            }
        }
        Ok(())
    }

    /// Scales `rs` to `size`, with the event, if the size differs.
    pub async fn scale_and_record(
        &self,
        rs: &ReplicaSet,
        size: i32,
        d: &Deployment,
    ) -> Result<ReplicaSet> {
        if rs_replicas(rs) == size {
            return Ok(rs.clone());
        }
        let operation = if size > rs_replicas(rs) { "up" } else { "down" };
        self.scale_rs(rs, size, d, operation).await
    }

    /// Sets the size and the replica annotations; records
    /// `ScalingReplicaSet` when the size changed.
    async fn scale_rs(
        &self,
        rs: &ReplicaSet,
        size: i32,
        d: &Deployment,
        operation: &str,
    ) -> Result<ReplicaSet> {
        let mut copy = rs.clone();
        let desired = util::replicas(d);
        let annotations =
            util::set_replicas_annotations(&mut copy, desired, desired + util::max_surge(d));
        let old = rs_replicas(rs);
        if old == size && !annotations {
            return Ok(rs.clone());
        }
        copy.spec.get_or_insert_with(Default::default).replicas = Some(size);
        let updated = self.update_rs(&copy).await?;
        if old != size {
            let name = rs.metadata.name.as_deref().unwrap_or_default();
            let message = format!("Scaled {operation} replica set {name} from {old} to {size}");
            self.recorder
                .record(d, EventType::Normal, "ScalingReplicaSet", message);
        }
        Ok(updated)
    }

    /// Deletes the oldest scaled-down ReplicaSets past revisionHistoryLimit.
    pub async fn cleanup(&self, d: &Deployment, old: &[ReplicaSet]) -> Result<()> {
        let Some(limit) = util::revision_history_limit(d) else {
            return Ok(());
        };
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = cleanable.len() as i64 - i64::from(limit);
        if excess <= 0 {
            return Ok(());
        }
        cleanable.sort_by_key(|rs| util::revision(&rs.metadata));
        let api: Api<ReplicaSet> = Api::namespaced(
            self.client.clone(),
            d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        for rs in cleanable.into_iter().take(excess as usize) {
            let status = rs.status.clone().unwrap_or_default();
            let settled =
                status.observed_generation.unwrap_or(0) >= rs.metadata.generation.unwrap_or(0);
            if status.replicas != 0 || rs_replicas(rs) != 0 || !settled {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            if let Err(err) = api
                .delete(&name, &DeleteParams::default())
                .await
                .map_err(Error::from)
            {
                if !err.is_not_found() {
                    return Err(err);
                }
            }
        }
        Ok(())
    }
}

/// The one active ReplicaSet, or the newest if none is active; None when
/// several are active (kube's `FindActiveOrLatest`).
fn active_or_latest(split: &Sets) -> Option<String> {
    let all = split.all();
    let active = active(&all);
    match active.len() {
        0 => match &split.new {
            Some(rs) => rs.metadata.name.clone(),
            None => {
                let mut old: Vec<&ReplicaSet> = split.old.iter().collect();
                old.sort_by(|a, b| util::creation_order(b, a));
                old.first().and_then(|rs| rs.metadata.name.clone())
            }
        },
        1 => active.into_iter().next(),
        _ => None,
    }
}

fn find_mut<'a>(split: &'a mut Sets, name: &str) -> Option<&'a mut ReplicaSet> {
    let matches = |rs: &ReplicaSet| rs.metadata.name.as_deref() == Some(name);
    if split.new.as_ref().is_some_and(matches) {
        return split.new.as_mut();
    }
    split.old.iter_mut().find(|rs| matches(rs))
}

/// Larger first; among equals, newer first when scaling up, older first
/// when scaling down.
fn by_size(a: &ReplicaSet, b: &ReplicaSet, up: bool) -> std::cmp::Ordering {
    rs_replicas(b).cmp(&rs_replicas(a)).then_with(|| match up {
        true => util::creation_order(b, a),
        false => util::creation_order(a, b),
    })
}

/// kube's `GetProportion`: the replicas `rs` gains or loses of `to_add`,
/// given `added` so far.
fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(rs, d);
    let allowed = to_add - added;
    match to_add > 0 {
        true => fraction.min(allowed),
        false => fraction.max(allowed),
    }
}

/// kube's `getReplicaSetFraction`: how much of the new total this
/// ReplicaSet's share of the old total is.
fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let desired = util::replicas(d);
    if desired == 0 {
        return -rs_replicas(rs);
    }
    let total = desired + util::max_surge(d);
    let annotated =
        util::annotation(&rs.metadata, util::MAX_REPLICAS).and_then(|v| v.parse::<i32>().ok());
    let annotated = match annotated {
        Some(n) if n != 0 => n,
        _ => d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0),
    };
    if annotated == 0 {
        return 0;
    }
    let size = f64::from(rs_replicas(rs)) * f64::from(total) / f64::from(annotated);
    size.round() as i32 - rs_replicas(rs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, replicas: i32, max: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {util::MAX_REPLICAS: max.to_string()}},
            "spec": {"replicas": replicas, "selector": {}},
        }))
        .unwrap()
    }

    fn deployment(replicas: i32) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "d"},
            "spec": {"replicas": replicas, "selector": {}, "template": {}}}))
        .unwrap()
    }

    /// kube's proportional-scaling cases: a 10 -> 20 scale during a
    /// rollout splits the growth by the sets' shares.
    #[test]
    fn proportions_follow_each_sets_share() {
        let d = deployment(20);
        // max-replicas was 13 (10 + 3 surge); 20 + 5 surge = 25 now.
        let new = rs("new", 5, 13);
        let old = rs("old", 8, 13);
        assert_eq!(proportion(&new, &d, 12, 0), 5);
        assert_eq!(proportion(&old, &d, 12, 5), 7);
        // Scaling to zero takes each set's whole size.
        let zero = deployment(0);
        assert_eq!(proportion(&new, &zero, -13, 0), -5);
    }
}
