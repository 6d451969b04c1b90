//! Prometheus metrics of a store member, served on `/metrics`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

/// Gauges read off the member at scrape time.
#[derive(Default)]
pub struct StateGauges {
    pub revision: Gauge,
    pub compact_revision: Gauge,
    pub raft_term: Gauge,
    pub raft_applied_index: Gauge,
    pub raft_commit_index: Gauge,
    pub is_leader: Gauge,
    pub has_leader: Gauge,
    pub watchers: Gauge,
    pub db_size_bytes: Gauge,
    pub leases: Gauge,
}

/// What the raft loop reports: how long each log sync takes (etcd's WAL
/// fsync) and each flush of the state machine before the log is cut
/// (etcd's backend commit), how many entries a Ready carries
/// (how well proposals are batched), and the log's bounds: snapshots
/// received from a leader and installed, and where the log now starts after
/// truncation (so operators and tests see catch-up and truncation happen).
#[derive(Clone, Debug)]
pub struct RaftMetrics {
    pub flush_seconds: Histogram,
    pub state_flush_seconds: Histogram,
    pub entries_per_ready: Histogram,
    pub snapshot_receive_success: Counter,
    pub snapshots_applied: Counter,
    pub log_first_index: Gauge,
    pub log_entry_bytes: Gauge,
    pub peer_sent_bytes: Counter,
    pub peer_received_bytes: Counter,
    pub peer_sent_failures: Counter,
}

impl Default for RaftMetrics {
    fn default() -> Self {
        RaftMetrics {
            flush_seconds: latency_histogram(),
            state_flush_seconds: latency_histogram(),
            entries_per_ready: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            snapshot_receive_success: Counter::default(),
            snapshots_applied: Counter::default(),
            log_first_index: Gauge::default(),
            log_entry_bytes: Gauge::default(),
            peer_sent_bytes: Counter::default(),
            peer_received_bytes: Counter::default(),
            peer_sent_failures: Counter::default(),
        }
    }
}

pub struct Metrics {
    pub registry: Registry,
    pub raft: RaftMetrics,
    requests: Family<RequestLabels, Counter>,
    latency: Family<MethodLabels, Histogram>,
    pub state: StateGauges,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("capstan_store");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<MethodLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "grpc_requests",
            "gRPC requests by method and status code",
            requests.clone(),
        );
        registry.register(
            "grpc_request_duration_seconds",
            "gRPC request latency by method",
            latency.clone(),
        );
        let raft = RaftMetrics::default();
        registry.register(
            "raft_flush_duration_seconds",
            "Time to make one raft Ready durable (one fsync)",
            raft.flush_seconds.clone(),
        );
        registry.register(
            "state_flush_duration_seconds",
            "Time to make the state machine durable before the raft log is cut",
            raft.state_flush_seconds.clone(),
        );
        registry.register(
            "raft_entries_per_ready",
            "Log entries persisted per raft Ready",
            raft.entries_per_ready.clone(),
        );
        register_log_metrics(&mut registry, &raft);
        register_network_metrics(&mut registry, &raft);
        let state = StateGauges::default();
        let gauges: [(&str, &str, &Gauge); 10] = [
            ("revision", "Current MVCC revision", &state.revision),
            (
                "compact_revision",
                "Revision history is compacted to",
                &state.compact_revision,
            ),
            ("raft_term", "Current raft term", &state.raft_term),
            (
                "raft_applied_index",
                "Last applied raft index",
                &state.raft_applied_index,
            ),
            (
                "raft_commit_index",
                "Last committed raft index",
                &state.raft_commit_index,
            ),
            (
                "is_leader",
                "1 if this member is the raft leader",
                &state.is_leader,
            ),
            (
                "has_leader",
                "1 if this member knows a leader",
                &state.has_leader,
            ),
            ("watchers", "Open watchers", &state.watchers),
            (
                "db_size_bytes",
                "Size of the backend on disk",
                &state.db_size_bytes,
            ),
            ("leases", "Granted leases", &state.leases),
        ];
        for (name, help, gauge) in gauges {
            registry.register(name, help, gauge.clone());
        }
        Metrics {
            registry,
            raft,
            requests,
            latency,
            state,
        }
    }

    pub fn record(&self, method: &'static str, code: &'static str, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { method, code })
            .inc();
        self.latency
            .get_or_create(&MethodLabels { method })
            .observe(elapsed.as_secs_f64());
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// etcd's name where it has one (`etcd_network_snapshot_receive_success`);
/// etcd has no metric for installed snapshots or the log's start.
fn register_log_metrics(registry: &mut Registry, raft: &RaftMetrics) {
    registry.register(
        "network_snapshot_receive_success",
        "Snapshots received in full from a leader",
        raft.snapshot_receive_success.clone(),
    );
    registry.register(
        "raft_snapshots_applied",
        "Leader snapshots installed in place of the state machine and log",
        raft.snapshots_applied.clone(),
    );
    registry.register(
        "raft_log_first_index",
        "Index of the first entry still in the raft log (grows with truncation)",
        raft.log_first_index.clone(),
    );
    registry.register(
        "raft_log_entry_bytes",
        "Payload bytes of the raft log's entries held in memory (as of its last truncation)",
        raft.log_entry_bytes.clone(),
    );
}

/// etcd's names (`etcd_network_peer_sent_bytes_total`...), without its
/// per-peer labels; they count the direct links' traffic (`transport::links`).
fn register_network_metrics(registry: &mut Registry, raft: &RaftMetrics) {
    let counters: [(&str, &str, &Counter); 3] = [
        (
            "network_peer_sent_bytes",
            "Bytes of raft messages written to peers' direct links",
            &raft.peer_sent_bytes,
        ),
        (
            "network_peer_received_bytes",
            "Bytes of raft messages read from peers' direct links",
            &raft.peer_received_bytes,
        ),
        (
            "network_peer_sent_failures",
            "Batches of raft messages a direct link could not take (peer down or slow)",
            &raft.peer_sent_failures,
        ),
    ];
    for (name, help, counter) in counters {
        registry.register(name, help, counter.clone());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
