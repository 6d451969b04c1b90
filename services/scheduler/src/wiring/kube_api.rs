//! `SchedulerApi` over the Kubernetes API (capstan-client's kube-rs
//! connection): bindings through `pods/binding`, status patches, graceful
//! evictions of preemption victims, Events through the client's recorder.

use capstan_client::events::{EventRecorder, EventType as RecordedType};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status as ApiStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

use crate::core::{
    ApiError, ApiResult, EventType, PodRef, SchedulerApi, SchedulerEvent, StatusPatch,
};

pub struct KubeApi {
    client: kube::Client,
    recorder: EventRecorder,
}

impl KubeApi {
    /// Must be called inside a tokio runtime (the recorder starts its writer).
    pub fn new(client: kube::Client, component: &str) -> KubeApi {
        KubeApi {
            recorder: EventRecorder::new(client.clone(), component, None),
            client,
        }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn translate(error: kube::Error) -> ApiError {
    match error {
        kube::Error::Api(response) if response.code == 404 => ApiError::NotFound(response.message),
        kube::Error::Api(response) if response.code == 409 => ApiError::Conflict(response.message),
        other => ApiError::Other(other.to_string()),
    }
}

fn now() -> String {
    k8s_openapi::chrono::Utc::now().to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Secs, true)
}

fn reference(pod: &PodRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(pod.namespace.clone()),
        name: Some(pod.name.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        ..Default::default()
    }
}

impl SchedulerApi for KubeApi {
    fn bind(&self, pod: &PodRef, node: &str) -> ApiResult {
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                namespace: Some(pod.namespace.clone()),
                uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(node.to_string()),
                ..Default::default()
            },
        };
        let api = self.pods(&pod.namespace);
        let name = pod.name.clone();
        async move {
            let body = serde_json::to_vec(&binding).map_err(|e| ApiError::Other(e.to_string()))?;
            api.create_subresource::<ApiStatus>("binding", &name, &PostParams::default(), body)
                .await
                .map_err(translate)?;
            Ok(())
        }
        .boxed()
    }

    fn patch_status(&self, pod: &PodRef, patch: StatusPatch) -> ApiResult {
        let mut status = serde_json::Map::new();
        if let Some((reason, message)) = patch.unschedulable {
            status.insert(
                "conditions".into(),
                json!([{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": message,
                    "lastProbeTime": null,
                    "lastTransitionTime": now(),
                }]),
            );
        }
        if let Some(node) = patch.nominated_node_name {
            let value = if node.is_empty() {
                serde_json::Value::Null
            } else {
                json!(node)
            };
            status.insert("nominatedNodeName".into(), value);
        }
        let body = json!({ "status": status });
        let api = self.pods(&pod.namespace);
        let name = pod.name.clone();
        async move {
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(body))
                .await
                .map_err(translate)?;
            Ok(())
        }
        .boxed()
    }

    fn preempt(&self, victim: &PodRef, message: &str) -> ApiResult {
        let condition = json!({ "status": { "conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": message,
            "lastTransitionTime": now(),
        }]}});
        let api = self.pods(&victim.namespace);
        let name = victim.name.clone();
        let uid = Some(victim.uid.clone()).filter(|u| !u.is_empty());
        async move {
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(condition))
                .await
                .map_err(translate)?;
            // The pod's own grace period applies; the uid guards against a namesake.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..Default::default()
            };
            api.delete(&name, &params).await.map_err(translate)?;
            Ok(())
        }
        .boxed()
    }

    fn record(&self, event: SchedulerEvent) {
        let event_type = match event.event_type {
            EventType::Normal => RecordedType::Normal,
            EventType::Warning => RecordedType::Warning,
        };
        self.recorder.record_for(
            reference(&event.regarding),
            event_type,
            &event.reason,
            event.message,
        );
    }
}
