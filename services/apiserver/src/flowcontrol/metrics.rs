//! The flow-control metrics, named as kube names them
//! (`apiserver_flowcontrol_*`). Label values are priority level and
//! flow schema names: bounded by the objects, and capped here anyway so
//! that a flood of created objects cannot grow the registry without end.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Distinct names a label may take; later ones are reported as
/// [`OVERFLOW`].
const MAX_NAMES: usize = 200;
pub const OVERFLOW: &str = "(overflow)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LevelLabel {
    pub priority_level: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowLabels {
    pub priority_level: String,
    pub flow_schema: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    pub priority_level: String,
    pub flow_schema: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    pub priority_level: String,
    pub flow_schema: String,
    /// Whether the request went on to run.
    pub execute: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug)]
pub struct FlowControlMetrics {
    pub inqueue_requests: Family<FlowLabels, Gauge>,
    pub inqueue_seats: Family<FlowLabels, Gauge>,
    pub executing_requests: Family<FlowLabels, Gauge>,
    pub executing_seats: Family<FlowLabels, Gauge>,
    pub dispatched: Family<FlowLabels, Counter>,
    pub rejected: Family<RejectLabels, Counter>,
    pub wait: Family<WaitLabels, Histogram, fn() -> Histogram>,
    pub estimated_seats: Family<FlowLabels, Histogram, fn() -> Histogram>,
    pub nominal_limit: Family<LevelLabel, Gauge>,
    pub lower_limit: Family<LevelLabel, Gauge>,
    pub upper_limit: Family<LevelLabel, Gauge>,
    pub current_limit: Family<LevelLabel, Gauge>,
    pub demand_high_watermark: Family<LevelLabel, FloatGauge>,
    pub demand_smoothed: Family<LevelLabel, FloatGauge>,
    pub target_seats: Family<LevelLabel, FloatGauge>,
    pub current_r: Family<LevelLabel, FloatGauge>,
    pub fair_fraction: FloatGauge,
    names: Arc<Mutex<HashSet<String>>>,
}

impl Default for FlowControlMetrics {
    fn default() -> Self {
        FlowControlMetrics::new()
    }
}

fn wait_histogram() -> Histogram {
    // 1 ms to about 65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn seats_histogram() -> Histogram {
    Histogram::new([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
}

impl FlowControlMetrics {
    pub fn new() -> FlowControlMetrics {
        FlowControlMetrics {
            inqueue_requests: Family::default(),
            inqueue_seats: Family::default(),
            executing_requests: Family::default(),
            executing_seats: Family::default(),
            dispatched: Family::default(),
            rejected: Family::default(),
            wait: Family::new_with_constructor(wait_histogram as fn() -> Histogram),
            estimated_seats: Family::new_with_constructor(seats_histogram as fn() -> Histogram),
            nominal_limit: Family::default(),
            lower_limit: Family::default(),
            upper_limit: Family::default(),
            current_limit: Family::default(),
            demand_high_watermark: Family::default(),
            demand_smoothed: Family::default(),
            target_seats: Family::default(),
            current_r: Family::default(),
            fair_fraction: FloatGauge::default(),
            names: Arc::default(),
        }
    }

    /// Registers under `apiserver_flowcontrol_` when `registry` has the
    /// `apiserver` prefix.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("flowcontrol");
        self.register_requests(r);
        self.register_levels(r);
    }

    fn register_requests(&self, r: &mut Registry) {
        let m = self.clone();
        r.register(
            "current_inqueue_requests",
            "Requests waiting in queues",
            m.inqueue_requests,
        );
        r.register(
            "current_inqueue_seats",
            "Seats waiting requests ask for",
            m.inqueue_seats,
        );
        r.register(
            "current_executing_requests",
            "Requests running",
            m.executing_requests,
        );
        r.register(
            "current_executing_seats",
            "Seats running requests hold",
            m.executing_seats,
        );
        r.register("dispatched_requests", "Requests let run", m.dispatched);
        r.register(
            "rejected_requests",
            "Requests rejected, by reason",
            m.rejected,
        );
        r.register(
            "request_wait_duration_seconds",
            "Time requests waited in queues",
            m.wait,
        );
        r.register(
            "work_estimated_seats",
            "Seats estimated per request",
            m.estimated_seats,
        );
    }

    fn register_levels(&self, r: &mut Registry) {
        let m = self.clone();
        r.register(
            "nominal_limit_seats",
            "Nominal concurrency limit",
            m.nominal_limit,
        );
        r.register(
            "lower_limit_seats",
            "Nominal limit less what may be lent",
            m.lower_limit,
        );
        r.register(
            "upper_limit_seats",
            "Nominal limit plus what may be borrowed",
            m.upper_limit,
        );
        r.register(
            "current_limit_seats",
            "Limit after lending and borrowing",
            m.current_limit,
        );
        r.register(
            "demand_seats_high_watermark",
            "Peak seat demand",
            m.demand_high_watermark,
        );
        r.register(
            "demand_seats_smoothed",
            "Smoothed seat demand",
            m.demand_smoothed,
        );
        r.register("target_seats", "Seat allocation target", m.target_seats);
        r.register(
            "current_r",
            "Virtual time of the level's queues",
            m.current_r,
        );
        r.register(
            "seat_fair_frac",
            "Fair fraction of the last division",
            m.fair_fraction,
        );
    }

    /// `name` as a label value, or [`OVERFLOW`] once too many names have
    /// been seen.
    pub fn name(&self, name: &str) -> String {
        let mut names = self.names.lock();
        if names.contains(name) {
            return name.to_string();
        }
        if names.len() >= MAX_NAMES {
            return OVERFLOW.to_string();
        }
        names.insert(name.to_string());
        name.to_string()
    }

    pub fn flow(&self, level: &str, schema: &str) -> FlowLabels {
        FlowLabels {
            priority_level: self.name(level),
            flow_schema: self.name(schema),
        }
    }

    pub fn level(&self, level: &str) -> LevelLabel {
        LevelLabel {
            priority_level: self.name(level),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_are_capped_and_exposed_as_kube_names_them() {
        let metrics = FlowControlMetrics::new();
        for i in 0..MAX_NAMES {
            assert_eq!(metrics.name(&format!("level-{i}")), format!("level-{i}"));
        }
        assert_eq!(metrics.name("one-too-many"), OVERFLOW);
        assert_eq!(metrics.name("level-3"), "level-3");
        let mut registry = Registry::with_prefix("apiserver");
        metrics.register(&mut registry);
        metrics
            .rejected
            .get_or_create(&RejectLabels {
                priority_level: "a".into(),
                flow_schema: "b".into(),
                reason: "queue-full",
            })
            .inc();
        metrics
            .dispatched
            .get_or_create(&metrics.flow("a", "b"))
            .inc();
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("apiserver_flowcontrol_rejected_requests_total{priority_level=\"a\",flow_schema=\"b\",reason=\"queue-full\"} 1"), "{text}");
        // Past the cap, new names are counted together.
        assert!(text.contains("apiserver_flowcontrol_dispatched_requests_total{priority_level=\"(overflow)\",flow_schema=\"(overflow)\"} 1"), "{text}");
        assert!(
            text.contains("# TYPE apiserver_flowcontrol_seat_fair_frac gauge"),
            "{text}"
        );
    }
}
