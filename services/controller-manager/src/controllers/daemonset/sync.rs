//! One DaemonSet's reconcile (kube's `syncDaemonSet`): claim its pods and
//! revisions, find the current revision, see which nodes should run it,
//! carry out the plan (see `plan`), write the status, trim the history.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::chrono::Utc;
use kube::api::Api;
use kube::core::Selector;

use super::eligibility::{daemon_template, fit, pin_to_node, target_node};
use super::plan::{NodePods, Plan, Planner, Rolling};
use super::revisions::{current_hash, ds_template};
use super::status::{calculate, needs_update};
use crate::context::Reconciler;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::history::{with_revision_label, History, CONTROLLER_REVISION_HASH};
use crate::intstr::scaled_value;
use crate::ownership::{self, controller_ref};
use crate::pod_control::{
    pod_from_template, slow_start_batch, PodControl, SLOW_START_INITIAL_BATCH,
};
use crate::status::update_derived_status;
use crate::{metrics, pods};

pub struct Syncer {
    pub daemon_sets: Store<DaemonSet>,
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    pub history: History,
    pub expectations: Expectations,
    pub control: PodControl,
    pub queue: Option<WorkQueue<String>>,
}

pub fn selector_of(ds: &DaemonSet) -> std::result::Result<Selector, String> {
    let selector = ds
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    ownership::parse_selector(&selector)
}

/// RollingUpdate's budget against `desired` nodes (both rounded up, as
/// kube does for DaemonSets; never both zero); None under OnDelete.
pub fn rolling_of(ds: &DaemonSet, desired: i32) -> Option<Rolling> {
    let strategy = ds
        .spec
        .as_ref()?
        .update_strategy
        .clone()
        .unwrap_or_default();
    if strategy.type_.as_deref() == Some("OnDelete") {
        return None;
    }
    let rolling = strategy.rolling_update.unwrap_or_default();
    let surge = rolling.max_surge.unwrap_or(IntOrString::Int(0));
    let unavailable = rolling.max_unavailable.unwrap_or(IntOrString::Int(1));
    let max_surge = scaled_value(&surge, desired, true).unwrap_or(0).max(0);
    let mut max_unavailable = scaled_value(&unavailable, desired, true)
        .unwrap_or(1)
        .max(0);
    if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    Some(Rolling {
        max_surge,
        max_unavailable,
    })
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(ds) = self.daemon_sets.get_by_key(key) else {
            self.expectations.forget(key);
            return Ok(());
        };
        let selector = match selector_of(&ds) {
            Ok(selector) => selector,
            Err(reason) => {
                tracing::warn!(%key, %reason, "invalid selector; not syncing");
                return Ok(());
            }
        };
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let ds_pods = self.claim_pods(&ds, &selector).await?;
        let mut revisions = self.history.claim(ds.as_ref(), &selector).await?;
        let mut collisions = ds
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0);
        let hash = current_hash(&ds, &mut revisions, &mut collisions).await?;
        let nodes = self.node_pods(&ds, &ds_pods);
        let now = Utc::now();
        let carried = match self.expectations.satisfied(key) {
            true => self.carry_out(key, &ds, &nodes, &hash, now).await,
            false => Ok(()),
        };
        let status = calculate(&ds, &nodes, &hash, collisions, now);
        if needs_update(&ds, &status) {
            self.write_status(&ds, &status).await?;
        }
        let live: HashSet<String> = ds_pods
            .iter()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get(CONTROLLER_REVISION_HASH)
                    .cloned()
            })
            .chain([hash])
            .collect();
        let is_live = |r: &ControllerRevision| {
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
                .is_some_and(|h| live.contains(h))
        };
        let limit = ds
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        revisions.truncate(&is_live, limit).await?;
        self.recheck_availability(key, &ds, &status);
        carried
    }
}

impl Syncer {
    async fn claim_pods(&self, ds: &Arc<DaemonSet>, selector: &Selector) -> Result<Vec<Arc<Pod>>> {
        let client = self.control.client();
        ownership::claim_from_cache(&self.pods, client, ds.as_ref(), selector).await
    }

    /// Every node with its fit and the daemon's pods on it; pods whose
    /// node is gone are left to the pod garbage collector.
    fn node_pods(&self, ds: &DaemonSet, ds_pods: &[Arc<Pod>]) -> Vec<NodePods> {
        let template = daemon_template(&ds_template(ds));
        let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for pod in ds_pods.iter().filter(|p| pods::phase(p) != "Succeeded") {
            if let Some(node) = target_node(pod) {
                by_node.entry(node).or_default().push(pod.clone());
            }
        }
        let mut nodes: Vec<NodePods> = self
            .nodes
            .list()
            .iter()
            .map(|node| {
                let name = node.metadata.name.clone().unwrap_or_default();
                NodePods {
                    fit: fit(node, &template),
                    pods: by_node.remove(&name).unwrap_or_default(),
                    node: name,
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        nodes
    }

    async fn carry_out(
        &self,
        key: &str,
        ds: &Arc<DaemonSet>,
        nodes: &[NodePods],
        hash: &str,
        now: k8s_openapi::chrono::DateTime<Utc>,
    ) -> Result<()> {
        let desired = nodes.iter().filter(|n| n.fit.should_run).count() as i32;
        let planner = Planner {
            hash: hash.to_string(),
            min_ready_seconds: ds
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0),
            rolling: rolling_of(ds, desired),
            now,
        };
        let Plan { create_on, delete } = planner.plan(nodes);
        let uids = delete.iter().filter_map(|p| p.metadata.uid.clone());
        self.expectations.expect(key, create_on.len(), uids);
        let deleted = self.delete_all(key, ds, &delete).await;
        let created = self.create_all(key, ds, &create_on, hash).await;
        created.and(deleted)
    }

    async fn create_all(
        &self,
        key: &str,
        ds: &Arc<DaemonSet>,
        nodes: &[String],
        hash: &str,
    ) -> Result<()> {
        let mut template = daemon_template(&ds_template(ds));
        let metadata = template.metadata.get_or_insert_with(Default::default);
        metadata.labels = Some(with_revision_label(metadata.labels.as_ref(), hash));
        let name = ds.metadata.name.clone().unwrap_or_default();
        let namespace = ds.metadata.namespace.clone().unwrap_or_default();
        let base = pod_from_template(&template, &controller_ref(ds.as_ref()), &format!("{name}-"));
        let make = |i: usize| {
            let mut pod = base.clone();
            pin_to_node(pod.spec.get_or_insert_with(Default::default), &nodes[i]);
            let namespace = namespace.clone();
            async move {
                match self.control.create(&namespace, &pod, ds.as_ref()).await {
                    Ok(_) => Ok(()),
                    Err(err) if err.is_namespace_terminating() => Ok(()),
                    Err(err) => Err(err),
                }
            }
        };
        let (created, failed) = slow_start_batch(nodes.len(), SLOW_START_INITIAL_BATCH, make).await;
        metrics::pods(super::ACCOUNT, "created", created);
        if created < nodes.len() {
            self.expectations
                .lower_creations(key, nodes.len() - created);
        }
        failed.map_or(Ok(()), Err)
    }

    async fn delete_all(&self, key: &str, ds: &Arc<DaemonSet>, doomed: &[Arc<Pod>]) -> Result<()> {
        let deletions = doomed.iter().map(|pod| async move {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let result = self.control.delete(namespace, name, uid, ds.as_ref()).await;
            if result.is_err() {
                self.expectations.deletion_observed(key, uid);
            }
            result
        });
        let results = futures::future::join_all(deletions).await;
        metrics::pods(
            super::ACCOUNT,
            "deleted",
            results.iter().filter(|r| r.is_ok()).count(),
        );
        results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
    }

    async fn write_status(&self, ds: &DaemonSet, status: &DaemonSetStatus) -> Result<()> {
        let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<DaemonSet> = Api::namespaced(self.control.client().clone(), namespace);
        update_derived_status(&api, ds, |d| d.status = Some(status.clone())).await?;
        Ok(())
    }

    fn recheck_availability(&self, key: &str, ds: &DaemonSet, status: &DaemonSetStatus) {
        let min_ready = ds
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0);
        let waiting = status.number_ready > status.number_available.unwrap_or(0);
        if let (true, true, Some(queue)) = (min_ready > 0, waiting, &self.queue) {
            queue.add_after(key.to_string(), Duration::from_secs(min_ready as u64));
        }
    }
}
