//! client-go's workqueue metrics, by the same names, labelled by the
//! queue's `name` (one per controller: a bounded set).

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

use crate::metrics::register;

/// The `name` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct QueueLabel {
    name: String,
}

type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;

struct Families {
    depth: Family<QueueLabel, Gauge>,
    adds: Family<QueueLabel, Counter>,
    queue_duration: Family<QueueLabel, Histogram>,
    work_duration: Family<QueueLabel, Histogram>,
    retries: Family<QueueLabel, Counter>,
    unfinished: Family<QueueLabel, Seconds>,
    longest: Family<QueueLabel, Seconds>,
}

fn durations() -> Family<QueueLabel, Histogram> {
    // client-go's buckets: 10 ns to 1 s... and on, by tens.
    Family::new_with_constructor(|| Histogram::new(exponential_buckets(1e-8, 10.0, 10)))
}

fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let f = Families {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: durations(),
            work_duration: durations(),
            retries: Family::default(),
            unfinished: Family::default(),
            longest: Family::default(),
        };
        register("workqueue_depth", "Current depth of the workqueue", f.depth.clone());
        register("workqueue_adds", "Total number of adds handled by the workqueue", f.adds.clone());
        register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the workqueue before being requested",
            f.queue_duration.clone(),
        );
        register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from the workqueue takes",
            f.work_duration.clone(),
        );
        register("workqueue_retries", "Total number of retries handled by the workqueue", f.retries.clone());
        register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            f.unfinished.clone(),
        );
        register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for the workqueue been running",
            f.longest.clone(),
        );
        f
    })
}

/// One queue's handles into the families.
#[derive(Clone)]
pub(super) struct QueueMetrics {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    unfinished: Seconds,
    longest: Seconds,
}

impl QueueMetrics {
    pub(super) fn new(name: &str) -> QueueMetrics {
        let f = families();
        let label = QueueLabel {
            name: name.to_string(),
        };
        QueueMetrics {
            depth: f.depth.get_or_create(&label).clone(),
            adds: f.adds.get_or_create(&label).clone(),
            queue_duration: f.queue_duration.get_or_create(&label).clone(),
            work_duration: f.work_duration.get_or_create(&label).clone(),
            retries: f.retries.get_or_create(&label).clone(),
            unfinished: f.unfinished.get_or_create(&label).clone(),
            longest: f.longest.get_or_create(&label).clone(),
        }
    }

    pub(super) fn added(&self, depth: usize) {
        self.adds.inc();
        self.depth(depth);
    }

    pub(super) fn depth(&self, depth: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    pub(super) fn taken(&self, depth: usize, waited: std::time::Duration) {
        self.depth(depth);
        self.queue_duration.observe(waited.as_secs_f64());
    }

    pub(super) fn done(&self, worked: std::time::Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }

    pub(super) fn retried(&self) {
        self.retries.inc();
    }

    pub(super) fn in_progress(&self, unfinished: f64, longest: f64) {
        self.unfinished.set(unfinished);
        self.longest.set(longest);
    }
}
