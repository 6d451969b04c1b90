//! One autoscaler's sync, kube's reconcileAutoscaler: read the target's
//! scale, decide the count (the bounds first, then the metrics, then
//! the behaviour), write the scale if it changes, and write the status
//! (counts, metrics, conditions) if it changed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use parking_lot::Mutex;

use super::behavior::{self, Counts, History, Normalized};
use super::compute::{compute, Source};
use super::conditions::{self, ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED};
use super::replicas::Calculator;
use crate::context::Reconciler;
use crate::error::{Error, Result};
use crate::scale::Scales;
use crate::status::update_status;

/// What every sync shares.
pub struct Syncer {
    pub autoscalers: Store<HorizontalPodAutoscaler>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    pub scales: Scales,
    pub calculator: Calculator,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`.
    pub downscale_window: Duration,
    /// Recommendations and scale events per autoscaler key.
    pub histories: Mutex<HashMap<String, History>>,
}

/// The decision of one sync.
struct Decision {
    desired: i32,
    rescale_reason: String,
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(cached) = self.autoscalers.get_by_key(key) else {
            self.histories.lock().remove(key);
            return Ok(());
        };
        let mut hpa = (*cached).clone();
        let outcome = self.reconcile(key, &mut hpa).await;
        if hpa.status != cached.status {
            let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
            let api: Api<HorizontalPodAutoscaler> =
                Api::namespaced(self.client.clone(), &namespace);
            let status = hpa.status.clone();
            update_status(&api, &cached, |fresh| fresh.status = status.clone()).await?;
        }
        outcome
    }
}

impl Syncer {
    fn warn(&self, hpa: &HorizontalPodAutoscaler, reason: &str, message: &str) {
        self.recorder
            .record(hpa, EventType::Warning, reason, message);
    }

    async fn reconcile(&self, key: &str, hpa: &mut HorizontalPodAutoscaler) -> Result<()> {
        let spec = hpa.spec.clone().unwrap_or_default();
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let api_version = target.api_version.clone().unwrap_or_default();
        let kind = (api_version.as_str(), target.kind.as_str());
        let scale = match self
            .scales
            .get(&self.client, &namespace, kind, &target.name)
            .await
        {
            Ok(scale) => scale,
            Err(err) => {
                let message = err.api_message();
                self.warn(hpa, "FailedGetScale", &message);
                let why = format!(
                    "the HPA controller was unable to get the target's current scale: {message}"
                );
                conditions::set(hpa, ABLE_TO_SCALE, false, "FailedGetScale", why);
                let current = hpa
                    .status
                    .as_ref()
                    .and_then(|s| s.current_replicas)
                    .unwrap_or(0);
                let desired = hpa.status.as_ref().map_or(0, |s| s.desired_replicas);
                conditions::set_counts(hpa, current, desired, Vec::new(), false);
                return Err(Error::Invalid(format!(
                    "failed to query scale subresource for {}/{}: {message}",
                    target.kind, target.name
                )));
            }
        };
        conditions::set(
            hpa,
            ABLE_TO_SCALE,
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let min = spec.min_replicas.unwrap_or(1);
        let (decision, statuses) = if current == 0 && min != 0 {
            let why = "scaling is disabled since the replica count of the target is zero";
            conditions::set(hpa, SCALING_ACTIVE, false, "ScalingDisabled", why);
            (
                Decision {
                    desired: 0,
                    rescale_reason: String::new(),
                },
                Vec::new(),
            )
        } else if current > spec.max_replicas {
            (
                bounded(
                    spec.max_replicas,
                    "Current number of replicas above Spec.MaxReplicas",
                ),
                Vec::new(),
            )
        } else if min != 0 && current < min {
            (
                bounded(min, "Current number of replicas below Spec.MinReplicas"),
                Vec::new(),
            )
        } else {
            match self.decide_from_metrics(key, hpa, &scale, current).await? {
                Some(found) => found,
                None => return Ok(()),
            }
        };
        let rescale = decision.desired != current;
        if rescale {
            self.rescale(key, hpa, scale, current, &decision).await?;
        }
        conditions::set_counts(hpa, current, decision.desired, statuses, rescale);
        Ok(())
    }

    /// The count the metrics ask for, normalized; None when the metrics
    /// cannot be acted on (the status then says why).
    async fn decide_from_metrics(
        &self,
        key: &str,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        current: i32,
    ) -> Result<
        Option<(
            Decision,
            Vec<k8s_openapi::api::autoscaling::v2::MetricStatus>,
        )>,
    > {
        let Some(selector) = self.selector_of(hpa, scale, current) else {
            return Ok(None);
        };
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let pods = match self.pods(&namespace, &selector).await {
            Ok(pods) => pods,
            Err(err) if err.code() == Some(400) => {
                self.selector_invalid(hpa, current, &err.api_message());
                return Ok(None);
            }
            Err(err) => return Err(err),
        };
        let source = Source {
            client: &self.client,
            calculator: &self.calculator,
            namespace: &namespace,
            selector: &selector,
            pods: &pods,
        };
        let computed = compute(&source, hpa, current).await;
        if let Some((failure, _)) = &computed.failure {
            self.warn(hpa, failure.reason, &failure.error);
        }
        let Some((proposed, metric)) = computed.proposal.clone() else {
            if let Some((failure, _)) = &computed.failure {
                let why = format!(
                    "the HPA was unable to compute the replica count: {}",
                    failure.error
                );
                conditions::set(hpa, SCALING_ACTIVE, false, failure.reason, why);
            }
            let summary = computed.failure_summary().unwrap_or_default();
            self.warn(hpa, "FailedComputeMetricsReplicas", &summary);
            let desired = hpa.status.as_ref().map_or(0, |s| s.desired_replicas);
            conditions::set_counts(hpa, current, desired, computed.statuses, false);
            return Ok(None);
        };
        let why =
            format!("the HPA was able to successfully calculate a replica count from {metric}");
        conditions::set(hpa, SCALING_ACTIVE, true, "ValidMetricFound", why);
        let rescale_reason = match proposed.cmp(&current) {
            std::cmp::Ordering::Greater => format!("{metric} above target"),
            std::cmp::Ordering::Less => "All metrics below target".to_string(),
            std::cmp::Ordering::Equal => String::new(),
        };
        let normalized = self.normalize(key, hpa, current, proposed);
        conditions::set(
            hpa,
            ABLE_TO_SCALE,
            true,
            normalized.able_reason,
            normalized.able_message,
        );
        conditions::set(
            hpa,
            SCALING_LIMITED,
            normalized.limited,
            normalized.limit_reason,
            normalized.limit_message,
        );
        let decision = Decision {
            desired: normalized.replicas,
            rescale_reason,
        };
        Ok(Some((decision, computed.statuses)))
    }

    /// The target's selector, or None with kube's condition and event.
    fn selector_of(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        current: i32,
    ) -> Option<String> {
        let selector = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        if !selector.is_empty() {
            return Some(selector);
        }
        self.warn(hpa, "SelectorRequired", "selector is required");
        conditions::set(
            hpa,
            SCALING_ACTIVE,
            false,
            "InvalidSelector",
            "the HPA target's scale is missing a selector",
        );
        let desired = hpa.status.as_ref().map_or(0, |s| s.desired_replicas);
        conditions::set_counts(hpa, current, desired, Vec::new(), false);
        None
    }

    fn selector_invalid(&self, hpa: &mut HorizontalPodAutoscaler, current: i32, message: &str) {
        self.warn(hpa, "InvalidSelector", message);
        let why = format!("the HPA target's scale has an invalid selector: {message}");
        conditions::set(hpa, SCALING_ACTIVE, false, "InvalidSelector", why);
        let desired = hpa.status.as_ref().map_or(0, |s| s.desired_replicas);
        conditions::set_counts(hpa, current, desired, Vec::new(), false);
    }

    /// The pods the selector picks, from the API server's cache (the API
    /// parses the selector as the scale subresource wrote it).
    async fn pods(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = ListParams::default().labels(selector).match_any();
        Ok(api.list(&params).await?.items)
    }

    fn normalize(
        &self,
        key: &str,
        hpa: &HorizontalPodAutoscaler,
        current: i32,
        desired: i32,
    ) -> Normalized {
        let spec = hpa.spec.clone().unwrap_or_default();
        let counts = Counts {
            min: spec.min_replicas.unwrap_or(1),
            max: spec.max_replicas,
            current,
            desired,
        };
        let mut histories = self.histories.lock();
        let history = histories.entry(key.to_string()).or_default();
        match &spec.behavior {
            None => history.normalize_plain(counts, self.downscale_window, Instant::now()),
            Some(b) => {
                let (up, down) = behavior::rules(b, self.downscale_window);
                history.normalize(counts, (&up, &down), Instant::now())
            }
        }
    }

    async fn rescale(
        &self,
        key: &str,
        hpa: &mut HorizontalPodAutoscaler,
        scale: Scale,
        current: i32,
        decision: &Decision,
    ) -> Result<()> {
        let spec = hpa.spec.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let api_version = target.api_version.clone().unwrap_or_default();
        let kind = (api_version.as_str(), target.kind.as_str());
        let desired = decision.desired;
        if let Err(err) = self
            .scales
            .set_replicas(&self.client, kind, scale, desired)
            .await
        {
            let message = err.api_message();
            let text = format!(
                "New size: {desired}; reason: {}; error: {message}",
                decision.rescale_reason
            );
            self.warn(hpa, "FailedRescale", &text);
            let why =
                format!("the HPA controller was unable to update the target scale: {message}");
            conditions::set(hpa, ABLE_TO_SCALE, false, "FailedUpdateScale", why);
            return Err(err);
        }
        let why = format!("the HPA controller was able to update the target scale to {desired}");
        conditions::set(hpa, ABLE_TO_SCALE, true, "SucceededRescale", why);
        let text = format!("New size: {desired}; reason: {}", decision.rescale_reason);
        self.recorder
            .record(&*hpa, EventType::Normal, "SuccessfulRescale", text);
        if let Some(b) = &spec.behavior {
            let (up, down) = behavior::rules(b, self.downscale_window);
            let mut histories = self.histories.lock();
            let history = histories.entry(key.to_string()).or_default();
            history.record_scale(current, desired, (&up, &down), Instant::now());
        }
        tracing::info!(hpa = key, current, desired, reason = %decision.rescale_reason, "rescaled");
        Ok(())
    }
}

fn bounded(desired: i32, reason: &str) -> Decision {
    Decision {
        desired,
        rescale_reason: reason.to_string(),
    }
}
