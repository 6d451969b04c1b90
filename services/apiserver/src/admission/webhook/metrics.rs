//! The webhook calls' latency on /metrics, by webhook, kind of webhook,
//! operation and outcome. kube's histogram has the same name
//! (`apiserver_admission_webhook_admission_duration_seconds`) with
//! `rejected` where this has `outcome`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub name: String,
    /// `admit` (mutating) or `validating`, kube's values.
    pub r#type: &'static str,
    pub operation: &'static str,
    /// `allowed`, `denied`, `error` (a failed call under Fail) or
    /// `ignored` (a failed call under Ignore).
    pub outcome: &'static str,
}

/// Shared by both plugins and registered with the server's metrics.
#[derive(Clone)]
pub struct WebhookMetrics {
    pub latency: Family<CallLabels, Histogram>,
}

impl Default for WebhookMetrics {
    fn default() -> WebhookMetrics {
        let latency = Family::<CallLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        WebhookMetrics { latency }
    }
}
