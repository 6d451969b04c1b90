//! Prometheus metrics: requests by verb, resource and code, latency, open
//! watches, in-flight requests, audit events, and the store's latency and
//! failovers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::admission::webhook::WebhookMetrics;
use crate::storage::StoreMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub resource: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    pub verb: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `readOnly` or `mutating`, kube's label values.
    pub request_kind: &'static str,
}

/// apiserver_current_inflight_requests and
/// apiserver_dropped_requests_total, as kube names them, kept by flow
/// control.
#[derive(Clone, Default)]
pub struct InFlightMetrics {
    pub current: Family<KindLabel, Gauge>,
    pub dropped: Family<KindLabel, Counter>,
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub latency: Family<VerbLabels, Histogram>,
    pub watches: Gauge,
    pub in_flight: InFlightMetrics,
    pub flow_control: crate::flowcontrol::metrics::FlowControlMetrics,
    pub audit: crate::audit::Counters,
    pub webhooks: WebhookMetrics,
    pub aggregator: crate::aggregator::AggregatorMetrics,
}

impl Metrics {
    pub fn new(store: &StoreMetrics) -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<VerbLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let watches = Gauge::default();
        let mut registry = Registry::with_prefix("apiserver");
        registry.register(
            "request",
            "API requests by verb, resource and HTTP code",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "API request latency (watches: time to open)",
            latency.clone(),
        );
        registry.register("registered_watchers", "Open watch streams", watches.clone());
        registry.register(
            "storage_request_duration_seconds",
            "Store requests by kind and outcome, over all their attempts",
            store.latency.clone(),
        );
        registry.register(
            "storage_failovers",
            "Store requests moved on to another member",
            store.failovers.clone(),
        );
        let in_flight = InFlightMetrics::default();
        registry.register(
            "current_inflight_requests",
            "Requests being served, by kind (readOnly or mutating; long-running ones not counted)",
            in_flight.current.clone(),
        );
        registry.register(
            "dropped_requests",
            "Requests refused with 429 by the in-flight limits, by kind",
            in_flight.dropped.clone(),
        );
        let audit = crate::audit::Counters::default();
        registry.register(
            "audit_event",
            "Audit events handed to the audit backend",
            audit.events.clone(),
        );
        registry.register(
            "audit_error",
            "Audit events dropped or not written",
            audit.errors.clone(),
        );
        let webhooks = WebhookMetrics::default();
        registry.register(
            "admission_webhook_admission_duration_seconds",
            "Admission webhook call latency by webhook, type (admit or validating), operation and outcome",
            webhooks.latency.clone(),
        );
        let aggregator = crate::aggregator::AggregatorMetrics::default();
        registry.register(
            "aggregator_unavailable_apiservice",
            "APIServices marked unavailable (1) or available (0), by name (kube's gauge)",
            aggregator.unavailable.clone(),
        );
        let flow_control = crate::flowcontrol::metrics::FlowControlMetrics::new();
        flow_control.register(&mut registry);
        Metrics {
            registry,
            requests,
            latency,
            watches,
            in_flight,
            flow_control,
            audit,
            webhooks,
            aggregator,
        }
    }
}

impl Metrics {
    pub fn observe(&self, verb: &str, resource: &str, code: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                verb: verb.into(),
                resource: resource.into(),
                code,
            })
            .inc();
        self.latency
            .get_or_create(&VerbLabels {
                verb: verb.into(),
                resource: resource.into(),
            })
            .observe(seconds);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        out
    }
}
