//! The node status, computed every 10 s (the kubelet's
//! `nodeStatusUpdateFrequency`) and written only when something besides
//! the heartbeat times changed (new images) or 5 minutes passed: with
//! Leases carrying liveness, a quiet node costs one status write per 5
//! minutes.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::queue::{run_workers, ItemExponentialFailureRateLimiter, WorkQueue};
use chrono::Utc;

use super::fleet::SharedFleet;
use super::{metrics, writes};
use crate::error::Error;
use crate::node::conditions::must_report;
use crate::node::images::node_images;

/// The kubelet's `nodeStatusUpdateFrequency`.
const CHECK_EVERY: Duration = Duration::from_secs(10);
const WORKERS: usize = 16;

pub struct StatusReporter {
    fleet: SharedFleet,
    queue: WorkQueue<String>,
}

impl StatusReporter {
    pub fn new(fleet: SharedFleet) -> Arc<StatusReporter> {
        let limiter =
            ItemExponentialFailureRateLimiter::new(Duration::from_millis(200), CHECK_EVERY);
        Arc::new(StatusReporter {
            fleet,
            queue: WorkQueue::with_rate_limiter("node_status", limiter),
        })
    }

    /// Schedules every node's first check, spread over one period.
    pub fn start(&self) {
        for node in self.fleet.all() {
            self.queue
                .add_after(node.name.clone(), CHECK_EVERY.mul_f64(rand::random()));
        }
    }

    /// Checks `node` now (it was started again).
    pub fn check_now(&self, node: &str) {
        self.queue.add(node.to_string());
    }

    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    pub async fn run(self: Arc<Self>) {
        let reporter = self.clone();
        run_workers(self.queue.clone(), WORKERS, move |name: String| {
            let reporter = reporter.clone();
            async move { reporter.check(&name).await }
        })
        .await;
    }

    async fn check(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.fleet.get(name).cloned() else {
            return Ok(());
        };
        if !node.is_running() {
            return Ok(());
        }
        let now = Utc::now();
        let (previous, status) = {
            let state = node.state.lock();
            let conditions = state
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let images = node_images(&state.images);
            let status = self.fleet.template.status(name, &conditions, now, &images);
            (state.status.clone(), status)
        };
        if must_report(previous.as_ref(), &status, now) {
            let result = writes::node_status(&node.client, name, &status).await;
            metrics::node_status_reported(result.is_ok());
            let written = result?;
            let mut state = node.state.lock();
            // Compared with what was sent, not with the server's copy,
            // which may spell the same status differently.
            state.status = Some(status);
            state.node = Some(Arc::new(written));
        }
        self.queue.add_after(name.to_string(), CHECK_EVERY);
        Ok(())
    }
}
