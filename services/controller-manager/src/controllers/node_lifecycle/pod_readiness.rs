//! Pods on a node that is not ready are not ready either (kube's
//! `MarkPodsNotReady`): their Ready condition goes False, so Services stop
//! sending them traffic long before they are evicted. Written through
//! `pods/status` with the resourceVersion read; a pod already marked is
//! not written again.

use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::{Api, PostParams};

use crate::error::{Error, Result};

/// The pod with its Ready condition False, if it was not already.
pub fn marked_not_ready(pod: &Pod) -> Option<Pod> {
    let mut pod = pod.clone();
    let conditions = pod.status.as_mut()?.conditions.as_mut()?;
    let ready = conditions.iter_mut().find(|c| c.type_ == "Ready")?;
    if ready.status == "False" {
        return None;
    }
    ready.status = "False".into();
    ready.last_transition_time = Some(Time(Utc::now()));
    Some(pod)
}

/// Marks every pod of `pods` bound to `node` not ready; goes on past
/// failures and returns the first.
pub async fn mark_not_ready(
    client: &kube::Client,
    recorder: &EventRecorder,
    node: &str,
    pods: &[Arc<Pod>],
) -> Result<()> {
    let mut first_error = None;
    for pod in pods {
        if crate::pods::node_name(pod) != node {
            continue;
        }
        let Some(marked) = marked_not_ready(pod) else {
            continue;
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let body = serde_json::to_vec(&marked).map_err(|e| Error::Invalid(e.to_string()))?;
        match api
            .replace_status(name, &PostParams::default(), body)
            .await
            .map_err(Error::from)
        {
            Ok(_) => recorder.record(
                pod.as_ref(),
                EventType::Warning,
                "NodeNotReady",
                "Node is not ready",
            ),
            Err(err) if err.is_not_found() => {}
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    match first_error {
        Some(err) => Err(err),
        None => Ok(()),
    }
}
