//! The heartbeat: every running node renews its Lease every 10 s (with
//! the kubelet's jitter), the first renewals spread over one interval so
//! thousands of nodes renew evenly rather than in bursts; many renewals
//! are in flight at once over the shared connections. A node keeps the
//! Lease it last wrote and replaces it (one write per renewal), reading
//! it back only after a conflict or an error.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::queue::{run_workers, ItemExponentialFailureRateLimiter, WorkQueue};
use chrono::Utc;

use super::fleet::{SharedFleet, SimNode};
use super::{metrics, writes};
use crate::error::Error;
use crate::heartbeat::lease::{first_renewal_after, new_lease, renew_after, renewed};

/// Keeps the Leases of a fleet's running nodes.
pub struct LeaseKeeper {
    fleet: SharedFleet,
    queue: WorkQueue<String>,
    /// Renewals in flight at once.
    parallelism: usize,
}

impl LeaseKeeper {
    pub fn new(fleet: SharedFleet, parallelism: usize) -> Arc<LeaseKeeper> {
        // The kubelet retries a failed renewal after 200 ms, doubling to 7 s.
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(200),
            Duration::from_secs(7),
        );
        Arc::new(LeaseKeeper {
            fleet,
            queue: WorkQueue::with_rate_limiter("node_lease", limiter),
            parallelism,
        })
    }

    /// Schedules every node's first renewal, spread over one interval.
    pub fn start(&self) {
        for node in self.fleet.all() {
            self.queue
                .add_after(node.name.clone(), first_renewal_after(rand::random()));
        }
    }

    /// Renews `node`'s Lease now (it was started again).
    pub fn renew_now(&self, node: &str) {
        self.queue.add(node.to_string());
    }

    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    pub async fn run(self: Arc<Self>) {
        let keeper = self.clone();
        run_workers(self.queue.clone(), self.parallelism, move |name: String| {
            let keeper = keeper.clone();
            async move { keeper.renew(&name).await }
        })
        .await;
    }

    async fn renew(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.fleet.get(name).cloned() else {
            return Ok(());
        };
        if !node.is_running() {
            return Ok(());
        }
        let result = write(&node).await;
        metrics::lease_renewed(result.is_ok());
        match result {
            Ok(lease) => {
                node.state.lock().lease = Some(lease);
                self.queue
                    .add_after(name.to_string(), renew_after(rand::random()));
                Ok(())
            }
            Err(e) => {
                // Read it afresh next time: it may have changed under us.
                node.state.lock().lease = None;
                Err(e)
            }
        }
    }
}

async fn write(node: &SimNode) -> Result<k8s_openapi::api::coordination::v1::Lease, Error> {
    let uid = node.uid();
    let cached = node.state.lock().lease.clone();
    if let Some(lease) = cached {
        let next = renewed(&lease, &node.name, uid.as_deref(), Utc::now());
        match writes::replace_lease(&node.client, &next).await {
            Ok(written) => return Ok(written),
            Err(e) if matches!(crate::error::api_code(&e), Some(404 | 409)) => {}
            Err(e) => return Err(Error::api(format!("renew lease of node {}", node.name))(e)),
        }
    }
    match writes::get_lease(&node.client, &node.name).await? {
        Some(current) => {
            let next = renewed(&current, &node.name, uid.as_deref(), Utc::now());
            writes::replace_lease(&node.client, &next)
                .await
                .map_err(Error::api(format!("renew lease of node {}", node.name)))
        }
        None => {
            writes::create_lease(
                &node.client,
                &new_lease(&node.name, uid.as_deref(), Utc::now()),
            )
            .await
        }
    }
}
