//! One pod's look, kube's `processPodOnNode`: stay, wait (its key queued
//! again for the moment its toleration runs out: a timer per pod, not a
//! pass over every pod), or go now. Going is kube's: the pod is marked
//! with the DisruptionTarget condition (so its owner and the disruption
//! controller can tell an eviction from a failure), an event is recorded
//! and it is deleted with its own grace period, conditional on its uid.

use std::collections::HashMap;
use std::time::Duration;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::chrono::{DateTime, SecondsFormat, Utc};
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::json;

use super::decide::{decide, Decision};
use crate::context::Reconciler;
use crate::controllers::disruption::stale::DISRUPTION_TARGET;
use crate::error::{Error, Result};
use crate::pod_control::delete_same_pod;
use crate::pods;

pub const REASON: &str = "TaintManagerEviction";
const CONDITION_REASON: &str = "DeletionByTaintManager";
const CONDITION_MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";
/// Slack after a toleration runs out before the pod is looked at.
const SLACK: Duration = Duration::from_millis(50);

pub struct Evictor {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    /// Where a pod's look at its deadline is queued (none in unit tests).
    pub queue: Option<WorkQueue<String>>,
    /// Pods waiting for their toleration to run out, and until when: a
    /// pod that no longer has to go gets kube's cancelling event.
    pub scheduled: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl Reconciler for Evictor {
    /// Reconciles the pod with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(pod) = self.pods.get_by_key(key) else {
            self.scheduled.lock().remove(key);
            return Ok(());
        };
        if pods::is_terminating(&pod) {
            self.scheduled.lock().remove(key);
            return Ok(());
        }
        let now = Utc::now();
        let decision = match self.nodes.get(None, pods::node_name(&pod)) {
            Some(node) => decide(&pod, &node, now),
            None => Decision::Stay,
        };
        match decision {
            Decision::Stay => {
                if self.scheduled.lock().remove(key).is_some() {
                    let message = format!("Cancelling deletion of Pod {key}");
                    self.recorder
                        .record(pod.as_ref(), EventType::Normal, REASON, message);
                }
                Ok(())
            }
            Decision::EvictAt(at) if at > now => {
                self.scheduled.lock().insert(key.to_string(), at);
                if let Some(queue) = &self.queue {
                    let wait = (at - now).to_std().unwrap_or_default();
                    queue.add_after(key.to_string(), wait + SLACK);
                }
                Ok(())
            }
            Decision::EvictAt(_) => {
                self.evict(key, &pod).await?;
                self.scheduled.lock().remove(key);
                Ok(())
            }
        }
    }
}

impl Evictor {
    async fn evict(&self, key: &str, pod: &Pod) -> Result<()> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        let patch = json!({"status": {"conditions": [{
            "type": DISRUPTION_TARGET, "status": "True", "lastTransitionTime": now,
            "reason": CONDITION_REASON, "message": CONDITION_MESSAGE,
        }]}});
        let marked = api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(Error::from);
        match marked {
            Err(err) if err.is_not_found() => return Ok(()),
            other => other?,
        };
        tracing::info!(pod = key, "evicting: NoExecute taint not tolerated");
        let message = format!("Marking for deletion Pod {key}");
        self.recorder
            .record(pod, EventType::Normal, REASON, message);
        delete_same_pod(&self.client, pod, None).await
    }
}
