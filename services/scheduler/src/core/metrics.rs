//! kube-scheduler's metrics, by kube's names, with bounded labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::queue::PendingCounts;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// scheduled, unschedulable or error.
    pub result: &'static str,
    /// The profile (scheduler name): as many as the configuration has.
    pub profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// active, backoff, unschedulable or gated.
    pub queue: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BindingLabels {
    /// success or error.
    pub result: &'static str,
}

pub struct Metrics {
    pub schedule_attempts: Family<AttemptLabels, Counter>,
    pub attempt_duration: Family<AttemptLabels, Histogram>,
    pub pending_pods: Family<QueueLabels, Gauge>,
    pub pod_scheduling_attempts: Histogram,
    pub binding_duration: Family<BindingLabels, Histogram>,
    pub preemption_attempts: Counter,
    pub preemption_victims: Histogram,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~16 s, kube's scheduling latency buckets.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            schedule_attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(latency_histogram),
            pending_pods: Family::default(),
            pod_scheduling_attempts: Histogram::new(exponential_buckets(1.0, 2.0, 5)),
            binding_duration: Family::new_with_constructor(latency_histogram),
            preemption_attempts: Counter::default(),
            preemption_victims: Histogram::new(exponential_buckets(1.0, 2.0, 7)),
        }
    }

    /// Registers every metric under the `scheduler_` prefix.
    pub fn register(&self, registry: &mut Registry) {
        let scheduler = registry.sub_registry_with_prefix("scheduler");
        scheduler.register(
            "schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            self.schedule_attempts.clone(),
        );
        scheduler.register(
            "scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            self.attempt_duration.clone(),
        );
        scheduler.register(
            "pending_pods",
            "Number of pending pods, by the queue type",
            self.pending_pods.clone(),
        );
        scheduler.register(
            "pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod",
            self.pod_scheduling_attempts.clone(),
        );
        scheduler.register(
            "binding_duration_seconds",
            "Binding latency in seconds",
            self.binding_duration.clone(),
        );
        scheduler.register(
            "preemption_attempts",
            "Total preemption attempts in the cluster till now",
            self.preemption_attempts.clone(),
        );
        scheduler.register(
            "preemption_victims",
            "Number of selected preemption victims",
            self.preemption_victims.clone(),
        );
    }

    pub fn attempt(&self, result: &'static str, profile: &str, seconds: f64) {
        let labels = AttemptLabels {
            result,
            profile: profile.to_string(),
        };
        self.schedule_attempts.get_or_create(&labels).inc();
        self.attempt_duration
            .get_or_create(&labels)
            .observe(seconds);
    }

    pub fn set_pending(&self, counts: PendingCounts) {
        for (queue, count) in [
            ("active", counts.active),
            ("backoff", counts.backoff),
            ("unschedulable", counts.unschedulable),
            ("gated", counts.gated),
        ] {
            self.pending_pods
                .get_or_create(&QueueLabels { queue })
                .set(count as i64);
        }
    }
}

static GLOBAL: std::sync::OnceLock<std::sync::Arc<Metrics>> = std::sync::OnceLock::new();

impl Metrics {
    /// The process's metrics: every scheduler in a process counts into them,
    /// so they are registered once.
    pub fn global() -> std::sync::Arc<Metrics> {
        GLOBAL
            .get_or_init(|| std::sync::Arc::new(Metrics::new()))
            .clone()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
