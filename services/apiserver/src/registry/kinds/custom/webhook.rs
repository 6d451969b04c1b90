//! A CRD's `conversion: Webhook`: objects sent to the webhook in one
//! apiextensions.k8s.io/v1 ConversionReview over HTTPS (the admission
//! webhooks' endpoint resolution and client, trusting the CRD's
//! caBundle), and the answer checked as kube checks it: the request's
//! uid, `result.status` Success, as many objects in the desired version
//! and kind, and no metadata changed but labels and annotations.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion;
use serde_json::{json, Value};
use tracing::Instrument;

use crate::admission::objects::Objects;
use crate::admission::webhook::client::Client;
use crate::admission::webhook::endpoint;
use crate::registry::conversion::{ConversionError, Converter};

/// kube's timeout for a conversion webhook call.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Webhook {
    config: WebhookClientConfig,
    ca_bundle: Option<Vec<u8>>,
    client: Client,
    /// Where `clientConfig.service` is looked up.
    objects: Arc<dyn Objects>,
}

impl Webhook {
    /// The converter of a CRD's `spec.conversion`, when it names a webhook.
    pub fn of(conversion: &CustomResourceConversion, objects: Arc<dyn Objects>) -> Option<Webhook> {
        let config = conversion.webhook.as_ref()?.client_config.as_ref()?;
        // The same fields as admission's clientConfig.
        let config: WebhookClientConfig = serde_json::to_value(config)
            .and_then(serde_json::from_value)
            .ok()?;
        Some(Webhook {
            ca_bundle: config.ca_bundle.as_ref().map(|b| b.0.clone()),
            config,
            client: Client::default(),
            objects,
        })
    }

    async fn call(&self, objects: &[Value], api_version: &str) -> Result<Vec<Value>, String> {
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": objects}});
        let target = endpoint::resolve(&self.config, TIMEOUT.as_secs(), self.objects.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let post = self.client.post(&target, self.ca_bundle.as_deref(), body);
        let answer = match tokio::time::timeout(TIMEOUT, post).await {
            Ok(answer) => answer.map_err(|e| e.to_string())?,
            Err(_) => return Err(format!("Post {:?}: context deadline exceeded", target.url)),
        };
        let answer: Value = serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
        converted_objects(&answer, &uid)
    }
}

/// The converted objects of a ConversionReview answer (kube's checks).
fn converted_objects(review: &Value, uid: &str) -> Result<Vec<Value>, String> {
    let gvk = (review["apiVersion"].as_str(), review["kind"].as_str());
    if gvk != (Some("apiextensions.k8s.io/v1"), Some("ConversionReview")) {
        return Err(format!(
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}, Kind={}",
            gvk.0.unwrap_or(""),
            gvk.1.unwrap_or("")
        ));
    }
    let response = &review["response"];
    if !response.is_object() {
        return Err("no response provided".into());
    }
    let got = response["uid"].as_str().unwrap_or("");
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let result = &response["result"];
    if result["status"] != "Success" {
        return match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(message) => Err(message.to_string()),
            None => Err(format!(
                "response.result.status was '{}', not 'Success'",
                result["status"].as_str().unwrap_or("")
            )),
        };
    }
    Ok(response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// kube keeps a converted object's metadata but for labels and
/// annotations, and refuses another kind or version than asked.
fn checked(original: &Value, mut converted: Value, api_version: &str) -> Result<Value, String> {
    if converted["apiVersion"] != api_version {
        return Err(format!(
            "invalid converted object: expected apiVersion {api_version}, got {}",
            converted["apiVersion"]
        ));
    }
    if converted["kind"] != original["kind"] {
        return Err(format!(
            "invalid converted object: expected kind {}, got {}",
            original["kind"], converted["kind"]
        ));
    }
    let mut metadata = original["metadata"].clone();
    for field in ["labels", "annotations"] {
        match converted["metadata"].get(field) {
            Some(value) if !value.is_null() => metadata[field] = value.clone(),
            _ => {
                if let Some(map) = metadata.as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
    converted["metadata"] = metadata;
    Ok(converted)
}

impl Converter for Webhook {
    fn convert<'a>(
        &'a self,
        objects: Vec<Value>,
        api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ConversionError>> {
        Box::pin(async move {
            let first = objects.first().cloned().unwrap_or_default();
            let failed = |why: String| {
                let (from, kind) = (first["apiVersion"].as_str(), first["kind"].as_str());
                ConversionError(format!(
                    "conversion webhook for {}, Kind={} failed: {why}",
                    from.unwrap_or(""),
                    kind.unwrap_or("")
                ))
            };
            let span = tracing::info_span!(
                "conversion_webhook",
                desired = api_version,
                objects = objects.len()
            );
            let call = self.call(&objects, api_version).instrument(span);
            let converted = call.await.map_err(failed)?;
            if converted.len() != objects.len() {
                return Err(failed(format!(
                    "returned {} objects, expected {}",
                    converted.len(),
                    objects.len()
                )));
            }
            let pairs = objects.iter().zip(converted);
            let checked =
                pairs.map(|(original, converted)| checked(original, converted, api_version));
            checked.collect::<Result<Vec<_>, _>>().map_err(failed)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_as_kube_checks_them() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u1", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}});
        assert_eq!(converted_objects(&ok, "u1").unwrap(), vec![json!({"a": 1})]);
        assert_eq!(
            converted_objects(&ok, "u2").unwrap_err(),
            "expected response.uid=\"u2\", got \"u1\""
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u1", "result": {"status": "Failure", "message": "no way"}}});
        assert_eq!(converted_objects(&failed, "u1").unwrap_err(), "no way");
    }

    #[test]
    fn only_labels_and_annotations_of_the_metadata_may_change() {
        let original = json!({"apiVersion": "x.io/v1", "kind": "K",
            "metadata": {"name": "a", "uid": "1", "labels": {"l": "1"}}});
        let converted = json!({"apiVersion": "x.io/v2", "kind": "K",
            "metadata": {"name": "b", "annotations": {"n": "2"}}, "spec": {}});
        let out = checked(&original, converted, "x.io/v2").unwrap();
        assert_eq!(
            out["metadata"],
            json!({"name": "a", "uid": "1", "annotations": {"n": "2"}})
        );
        let wrong = json!({"apiVersion": "x.io/v1", "kind": "K", "metadata": {}});
        assert!(checked(&original, wrong, "x.io/v2").is_err());
    }
}
