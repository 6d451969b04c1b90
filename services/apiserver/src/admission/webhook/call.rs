//! One webhook called for one request: refused up front on a dry run it
//! cannot take, otherwise the review sent within its timeoutSeconds, and
//! a failed call (unreachable, timed out, not 200, not a valid review)
//! handled by its failurePolicy: Fail answers kube's 500 `failed calling
//! webhook "<name>": ...`, Ignore lets the request through. Each call is
//! a tracing span and one observation of the latency histogram.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tracing::Instrument;

use super::super::objects::Objects;
use super::super::{AdmissionError, Attributes};
use super::client::{CallError, Client};
use super::endpoint;
use super::hook::Hook;
use super::metrics::{CallLabels, WebhookMetrics};
use super::review::{self, ReviewError, Verdict};

/// Why a call gave no verdict.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("failed to call webhook: {0}")]
    Call(#[from] CallError),
    #[error("received invalid webhook response: {0}")]
    Review(#[from] ReviewError),
}

/// Calls webhooks for one plugin.
pub struct Caller {
    client: Client,
    objects: Arc<dyn Objects>,
    metrics: WebhookMetrics,
    /// kube's `type` label: `admit` or `validating`.
    kind: &'static str,
}

impl Caller {
    pub fn new(objects: Arc<dyn Objects>, metrics: WebhookMetrics, kind: &'static str) -> Caller {
        Caller {
            client: Client::default(),
            objects,
            metrics,
            kind,
        }
    }

    pub fn objects(&self) -> &dyn Objects {
        self.objects.as_ref()
    }

    /// Calls `hook` on `object`: the JSONPatch of an allowed answer, if
    /// any, or the refusal.
    pub async fn call(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Option<Vec<u8>>, AdmissionError> {
        if attributes.dry_run && !hook.dry_run_safe() {
            let why = format!("admission webhook {:?} does not support dry run", hook.name);
            return Err(AdmissionError::BadRequest(why));
        }
        let operation = attributes.operation.as_str();
        let span = tracing::info_span!("admission_webhook", webhook = %hook.name, kind = self.kind, operation);
        let started = Instant::now();
        let attempt = self
            .attempt(hook, attributes, object)
            .instrument(span.clone())
            .await;
        if let Ok(verdict) = &attempt {
            pass_on_feedback(hook, verdict, attributes);
        }
        let (outcome, result) = judge(hook, attempt);
        span.in_scope(|| tracing::debug!(outcome, "webhook answered"));
        let labels = CallLabels {
            name: hook.name.clone(),
            r#type: self.kind,
            operation,
            outcome,
        };
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.latency.get_or_create(&labels).observe(seconds);
        result
    }

    async fn attempt(
        &self,
        hook: &Hook,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Verdict, Failure> {
        let timeout = hook.timeout();
        let config = &hook.client_config;
        let target = endpoint::resolve(config, timeout.as_secs(), self.objects())
            .await
            .map_err(CallError::from)?;
        let version = hook.review_version();
        let (uid, review) = review::request(version, attributes, object);
        let body = serde_json::to_vec(&review).expect("JSON values serialize");
        let ca = config.ca_bundle.as_ref().map(|b| b.0.as_slice());
        let post = self.client.post(&target, ca, body);
        let answer = tokio::time::timeout(timeout, post)
            .await
            .map_err(|_| CallError::Timeout(target.url.clone()))??;
        Ok(review::verdict(&answer, version, &uid)?)
    }
}

/// A webhook's warnings reach the client whether it allowed the request
/// or not, and its audit annotations go under `<webhook name>/<key>`, as
/// kube's dispatchers pass them on.
fn pass_on_feedback(hook: &Hook, verdict: &Verdict, attributes: &Attributes<'_>) {
    for warning in &verdict.warnings {
        attributes.feedback.warn(warning.as_str());
    }
    for (key, value) in &verdict.audit_annotations {
        if key.is_empty() {
            continue;
        }
        let key = format!("{}/{key}", hook.name);
        attributes.feedback.annotate(key, value.as_str());
    }
}

/// The outcome label and the plugin's answer for one attempt.
fn judge(
    hook: &Hook,
    attempt: Result<Verdict, Failure>,
) -> (&'static str, Result<Option<Vec<u8>>, AdmissionError>) {
    match attempt {
        Ok(verdict) if verdict.allowed => ("allowed", Ok(verdict.patch)),
        Ok(verdict) => {
            let denial = review::denial(&hook.name, verdict.status.as_ref());
            ("denied", Err(AdmissionError::Rejected(denial)))
        }
        Err(failure) if hook.ignores_failure() => {
            tracing::warn!(webhook = %hook.name, %failure, "failed calling webhook, failing open");
            ("ignored", Ok(None))
        }
        Err(failure) => {
            let why = format!("failed calling webhook {:?}: {failure}", hook.name);
            ("error", Err(AdmissionError::Internal(why)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::plugins::testing::Memory;
    use super::super::super::Operation;
    use super::*;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn hook(failure_policy: &str, side_effects: &str) -> Hook {
        serde_json::from_value(json!({
            "name": "down.example.com", "failurePolicy": failure_policy, "sideEffects": side_effects,
            "clientConfig": {"url": "https://127.0.0.1:1/"}, "admissionReviewVersions": ["v1"]}))
        .unwrap()
    }

    fn attributes(user: &UserInfo, dry_run: bool) -> Attributes<'_> {
        Attributes {
            dry_run,
            ..super::super::super::plugins::testing::attributes(
                Operation::Create,
                "pods",
                "ns",
                "p",
                user,
            )
        }
    }

    #[tokio::test]
    async fn a_webhook_that_cannot_be_reached_fails_by_its_policy() {
        let metrics = WebhookMetrics::default();
        let caller = Caller::new(Arc::new(Memory::default()), metrics.clone(), "admit");
        let user = UserInfo::anonymous();
        let a = attributes(&user, false);
        let err = caller
            .call(&hook("Fail", "None"), &a, None)
            .await
            .unwrap_err();
        let AdmissionError::Internal(message) = err else {
            panic!("{err:?}")
        };
        assert!(
            message.starts_with("failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:1/?timeout=10s\": dial tcp 127.0.0.1:1: "),
            "{message}"
        );
        assert_eq!(
            caller.call(&hook("Ignore", "None"), &a, None).await,
            Ok(None)
        );
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("hook", "calls", metrics.latency.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains(r#"hook_count{name="down.example.com",type="admit",operation="CREATE",outcome="error"} 1"#), "{text}");
        assert!(text.contains(r#"outcome="ignored"} 1"#), "{text}");
    }

    #[tokio::test]
    async fn a_dry_run_never_reaches_a_webhook_with_side_effects() {
        let caller = Caller::new(
            Arc::new(Memory::default()),
            WebhookMetrics::default(),
            "validating",
        );
        let user = UserInfo::anonymous();
        let err = caller
            .call(&hook("Ignore", "Some"), &attributes(&user, true), None)
            .await;
        let message = "admission webhook \"down.example.com\" does not support dry run";
        assert_eq!(err, Err(AdmissionError::BadRequest(message.into())));
        // NoneOnDryRun may be called (and here fails open).
        let ok = caller
            .call(
                &hook("Ignore", "NoneOnDryRun"),
                &attributes(&user, true),
                None,
            )
            .await;
        assert_eq!(ok, Ok(None));
    }
}
