//! The noisy tenant: during the churn, a plain user lists every pod of
//! the cluster from many loops at once, as fast as it is answered (the
//! load API Priority and Fairness exists for). What it got is counted
//! here; what everyone else got is the probe's churn phase (the SLOs),
//! the pods replaced during the churn (the controllers, the scheduler
//! and the nodes) and whether every node stayed Ready (their heartbeats).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::objects;
use crate::apiserver::http::Connection;

/// The tenant's user: not exempt, so its lists go through the queues of
/// `global-default` as any user's would.
const TENANT_USER: &str = "noisy-tenant";

/// What the tenant got, by answer.
#[derive(Debug)]
struct Counts {
    served: AtomicU64,
    /// 429: turned away by priority and fairness.
    rejected: AtomicU64,
    failed: AtomicU64,
    /// The fewest nodes seen Ready while the tenant ran (their heartbeats
    /// held if this is every node).
    fewest_ready_nodes: AtomicUsize,
}

/// The tenant's loops, running until stopped.
pub struct Tenant {
    counts: Arc<Counts>,
    latencies: Arc<Mutex<Histogram<u64>>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    begun: Instant,
}

/// The tenant's part of the report.
#[derive(Debug, Clone, Serialize)]
pub struct TenantSummary {
    pub loops: usize,
    pub seconds: f64,
    pub lists_served: u64,
    pub lists_rejected_429: u64,
    pub lists_failed: u64,
    pub served_p50_ms: u64,
    pub served_p99_ms: u64,
    /// The fewest nodes Ready at any look (every 2 s) while it ran.
    pub fewest_ready_nodes: Option<usize>,
}

impl Tenant {
    /// Lets the tenant list pods (the probe's ClusterRole, bound to it
    /// too), then starts `loops` loops of `GET /api/v1/pods`.
    pub async fn start(port: u16, timeout: Duration, loops: usize) -> Result<Tenant, String> {
        let mut connection = Connection::new(port, timeout);
        let path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        super::api::create(&mut connection, path, objects::probe_binding(TENANT_USER)).await?;
        let counts = Arc::new(Counts {
            served: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            fewest_ready_nodes: AtomicUsize::new(usize::MAX),
        });
        let bounds = Histogram::new_with_bounds(1, 3_600_000, 3).expect("valid bounds");
        let latencies = Arc::new(Mutex::new(bounds));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks: Vec<_> = (0..loops)
            .map(|_| {
                let (counts, latencies, stop) = (counts.clone(), latencies.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut connection = Connection::impersonating(port, timeout, TENANT_USER);
                    while !stop.load(Ordering::Relaxed) {
                        list_once(&mut connection, &counts, &latencies).await;
                    }
                })
            })
            .collect();
        let (sampled, until) = (counts.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::new(port, timeout);
            while !until.load(Ordering::Relaxed) {
                if let Ok(ready) = super::api::ready_nodes(&mut connection).await {
                    sampled
                        .fewest_ready_nodes
                        .fetch_min(ready, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }));
        Ok(Tenant {
            counts,
            latencies,
            stop,
            tasks,
            begun: Instant::now(),
        })
    }

    /// Stops the loops (each ends after its list in flight) and sums up.
    pub async fn stop(self, loops: usize) -> TenantSummary {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        let latencies = self.latencies.lock().expect("tenant latencies");
        TenantSummary {
            loops,
            seconds: self.begun.elapsed().as_secs_f64(),
            lists_served: self.counts.served.load(Ordering::Relaxed),
            lists_rejected_429: self.counts.rejected.load(Ordering::Relaxed),
            lists_failed: self.counts.failed.load(Ordering::Relaxed),
            served_p50_ms: latencies.value_at_quantile(0.5),
            served_p99_ms: latencies.value_at_quantile(0.99),
            fewest_ready_nodes: Some(self.counts.fewest_ready_nodes.load(Ordering::Relaxed))
                .filter(|n| *n != usize::MAX),
        }
    }
}

async fn list_once(
    connection: &mut Connection,
    counts: &Counts,
    latencies: &Mutex<Histogram<u64>>,
) {
    let begun = Instant::now();
    match connection.get("/api/v1/pods").await {
        Ok(answer) if answer.status.is_success() => {
            counts.served.fetch_add(1, Ordering::Relaxed);
            let millis = begun.elapsed().as_millis().max(1) as u64;
            latencies
                .lock()
                .expect("tenant latencies")
                .saturating_record(millis);
        }
        Ok(answer) if answer.status.as_u16() == 429 => {
            counts.rejected.fetch_add(1, Ordering::Relaxed);
            // A client honours Retry-After; this one comes back at once
            // but briefly, so the loops stay the load they are meant to be.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        _ => {
            counts.failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl TenantSummary {
    /// One line for the report.
    pub fn line(&self) -> String {
        format!(
            "noisy tenant during the churn: {} loops listing every pod for {:.0} s: {} lists served \
             (p50 {} ms, p99 {} ms), {} turned away with 429, {} failed otherwise; \
             fewest nodes Ready meanwhile: {}\n",
            self.loops,
            self.seconds,
            self.lists_served,
            self.served_p50_ms,
            self.served_p99_ms,
            self.lists_rejected_429,
            self.lists_failed,
            self.fewest_ready_nodes
                .map_or("not seen".to_string(), |n| n.to_string())
        )
    }
}
