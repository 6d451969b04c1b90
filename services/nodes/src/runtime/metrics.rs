//! The process's Prometheus metrics, in the registry capstan-client
//! serves on `/metrics` (labels bounded: results, and rejection reasons,
//! which are one per resource the nodes have).

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Result_ {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

struct Metrics {
    pod_status_writes: Family<Result_, Counter>,
    pod_deletions: Counter,
    pod_rejections: Family<Reason, Counter>,
    lease_renewals: Family<Result_, Counter>,
    node_status_reports: Family<Result_, Counter>,
    running_nodes: Gauge,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = Metrics {
            pod_status_writes: Family::default(),
            pod_deletions: Counter::default(),
            pod_rejections: Family::default(),
            lease_renewals: Family::default(),
            node_status_reports: Family::default(),
            running_nodes: Gauge::default(),
        };
        use capstan_client::metrics::register;
        register(
            "capstan_nodes_pod_status_writes",
            "Pod status writes by the simulated nodes",
            m.pod_status_writes.clone(),
        );
        register(
            "capstan_nodes_pod_deletions",
            "Pods deleted once their containers stopped",
            m.pod_deletions.clone(),
        );
        register(
            "capstan_nodes_pod_rejections",
            "Pods the nodes refused, by the kubelet's reason",
            m.pod_rejections.clone(),
        );
        register(
            "capstan_nodes_lease_renewals",
            "Node Lease renewals",
            m.lease_renewals.clone(),
        );
        register(
            "capstan_nodes_node_status_reports",
            "Node status reports",
            m.node_status_reports.clone(),
        );
        register(
            "capstan_nodes_running_nodes",
            "Simulated nodes running (not stopped)",
            m.running_nodes.clone(),
        );
        m
    })
}

fn result(ok: bool) -> Result_ {
    Result_ {
        result: if ok { "ok" } else { "error" },
    }
}

pub fn pod_status_written(ok: bool) {
    metrics().pod_status_writes.get_or_create(&result(ok)).inc();
}

pub fn pod_deleted() {
    metrics().pod_deletions.inc();
}

pub fn pod_rejected(reason: &str) {
    let reason = Reason {
        reason: reason.to_string(),
    };
    metrics().pod_rejections.get_or_create(&reason).inc();
}

pub fn lease_renewed(ok: bool) {
    metrics().lease_renewals.get_or_create(&result(ok)).inc();
}

pub fn node_status_reported(ok: bool) {
    metrics()
        .node_status_reports
        .get_or_create(&result(ok))
        .inc();
}

pub fn running_nodes(count: usize) {
    metrics().running_nodes.set(count as i64);
}
