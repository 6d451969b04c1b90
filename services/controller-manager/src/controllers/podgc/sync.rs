//! One key's work: the count of terminated pods ([`COUNT_KEY`]), or one
//! pod that may be an orphan or an unscheduled pod being deleted. A pod
//! that has not ended is marked Failed (orphans also with the
//! DisruptionTarget condition, reason DeletionByPodGC) before it is
//! deleted with grace 0, so its owner (a Job) counts it as kube's would.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::chrono::{SecondsFormat, Utc};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::orphans::{Quarantine, Verdict};
use super::terminated;
use crate::context::Reconciler;
use crate::controllers::disruption::stale::DISRUPTION_TARGET;
use crate::error::{Error, Result};
use crate::pod_control::delete_same_pod;
use crate::pods;

/// The queue's key for counting the terminated pods (no pod's key: a
/// name cannot hold `#`).
pub const COUNT_KEY: &str = "#terminated";
/// Deletions of terminated pods in flight at once (kube's 10 workers).
const PARALLEL_DELETES: usize = 10;

pub struct Collector {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub client: kube::Client,
    /// `--terminated-pod-gc-threshold` (0 or less: off).
    pub threshold: i64,
    pub quarantine_period: Duration,
    /// Where a pod's look after its quarantine is queued (none in unit tests).
    pub queue: Option<WorkQueue<String>>,
    pub quarantine: Quarantine,
}

impl Reconciler for Collector {
    async fn sync(&self, key: &str) -> Result<()> {
        if key == COUNT_KEY {
            return self.collect_terminated().await;
        }
        let Some(pod) = self.pods.get_by_key(key) else {
            return Ok(());
        };
        let node = pods::node_name(&pod);
        if node.is_empty() {
            if !pods::is_terminating(&pod) {
                return Ok(());
            }
            tracing::info!(pod = key, "deleting an unscheduled pod that is terminating");
            return self.fail_and_delete(&pod, false).await;
        }
        if self.nodes.get(None, node).is_some() {
            return Ok(());
        }
        match self.quarantine.check(node, self.quarantine_period) {
            Verdict::Wait(left) => {
                if let Some(queue) = &self.queue {
                    queue.add_after(key.to_string(), left);
                }
                return Ok(());
            }
            Verdict::Confirm => {
                let api: Api<Node> = Api::all(self.client.clone());
                if api.get_opt(node).await?.is_some() {
                    self.quarantine.forget(node);
                    return Ok(());
                }
                self.quarantine.confirm(node);
            }
            Verdict::Gone => {}
        }
        tracing::info!(
            pod = key,
            node,
            "deleting an orphaned pod: its node is gone"
        );
        self.fail_and_delete(&pod, true).await
    }
}

impl Collector {
    /// `node` exists: pods bound to it are not orphans.
    pub fn node_seen(&self, node: &str) {
        self.quarantine.forget(node);
    }

    async fn collect_terminated(&self) -> Result<()> {
        let all = self.pods.by_index(terminated::INDEX, terminated::value());
        let doomed = terminated::excess(all, self.threshold);
        if doomed.is_empty() {
            return Ok(());
        }
        tracing::info!(
            count = doomed.len(),
            threshold = self.threshold,
            "deleting terminated pods past the threshold"
        );
        for batch in doomed.chunks(PARALLEL_DELETES) {
            let results = join_all(batch.iter().map(|p| self.delete(p))).await;
            results.into_iter().collect::<Result<Vec<()>>>()?;
        }
        Ok(())
    }

    /// Marks `pod` Failed if it has not ended (with the DisruptionTarget
    /// condition for an orphan), then deletes it.
    async fn fail_and_delete(&self, pod: &Arc<Pod>, orphan: bool) -> Result<()> {
        if !terminated::is_terminated(pod) {
            let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
            let mut status = json!({"phase": "Failed"});
            if orphan {
                status["conditions"] = json!([{
                    "type": DISRUPTION_TARGET, "status": "True", "lastTransitionTime": now,
                    "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists",
                }]);
            }
            let patch = json!({ "status": status });
            let marked = self
                .api(pod)
                .patch_status(
                    name(pod),
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
                .map_err(Error::from);
            match marked {
                Err(err) if err.is_not_found() => return Ok(()),
                other => other?,
            };
        }
        self.delete(pod).await
    }

    /// Deletes `pod` for good (grace 0), if it is still the same pod.
    async fn delete(&self, pod: &Arc<Pod>) -> Result<()> {
        delete_same_pod(&self.client, pod, Some(0)).await
    }

    fn api(&self, pod: &Pod) -> Api<Pod> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}
