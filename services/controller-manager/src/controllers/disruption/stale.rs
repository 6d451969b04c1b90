//! Pods marked for a disruption that never came: the eviction API (or
//! the scheduler's preemption, or the taint manager) sets the
//! DisruptionTarget condition before deleting a pod; if the pod is still
//! not being deleted two minutes later, the mark is withdrawn (status
//! False), as kube's disruption controller does, so that nothing reads a
//! pod as about to go that stays.

use std::time::Duration as StdDuration;

use capstan_client::informer::{InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::chrono::{DateTime, Duration, Utc};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::error::{Error, Result};
use crate::pods;

pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// How long a mark may stand without a deletion.
pub const STALE_AFTER: Duration = Duration::minutes(2);

fn mark(pod: &Pod) -> Option<&PodCondition> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == DISRUPTION_TARGET && c.status == "True")
}

/// When the pod's mark goes stale, if it has one and is not being deleted.
pub fn stale_at(pod: &Pod) -> Option<DateTime<Utc>> {
    if pods::is_terminating(pod) {
        return None;
    }
    let since = mark(pod)?.last_transition_time.as_ref()?.0;
    Some(since + STALE_AFTER)
}

/// Puts a marked pod's key on `queue` for when its mark goes stale.
pub fn on_pod_event(event: &InformerEvent<Pod>, queue: &WorkQueue<String>) {
    if let InformerEvent::Deleted(_) = event {
        return;
    }
    if let Some(at) = stale_at(event.object()) {
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        queue.add_after(event.key(), wait + StdDuration::from_millis(10));
    }
}

/// Withdraws the mark of the pod with `key` if it is stale by now.
pub async fn sync(
    pods: &Store<Pod>,
    client: &kube::Client,
    queue: &WorkQueue<String>,
    key: &str,
) -> Result<()> {
    let Some(pod) = pods.get_by_key(key) else {
        return Ok(());
    };
    let Some(at) = stale_at(&pod) else {
        return Ok(());
    };
    let now = Utc::now();
    if at > now {
        queue.add_after(key.to_string(), (at - now).to_std().unwrap_or_default());
        return Ok(());
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"status": {"conditions": [{
        "type": DISRUPTION_TARGET, "status": "False",
        "lastTransitionTime": now.to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true),
    }]}});
    let result = api
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(Error::from);
    match result {
        Err(err) if !err.is_not_found() => Err(err),
        _ => Ok(()),
    }
}
