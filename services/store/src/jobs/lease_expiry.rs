//! The leader's lease clock: expired leases are revoked through raft.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_proto::etcdserverpb::LeaseRevokeRequest;
use capstan_proto::internal::raft_request::Request;

use crate::server::Context;

/// How often the leader looks for expired leases (etcd: 500 ms).
const CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// Revokes proposed per check, bounding the load expiry puts on the log.
const MAX_REVOKES_PER_CHECK: usize = 500;

pub async fn run_lease_expiry(ctx: Arc<Context>) {
    let mut ticker = tokio::time::interval(CHECK_INTERVAL);
    loop {
        ticker.tick().await;
        let expired = ctx
            .lessor
            .lock()
            .take_expired(Instant::now(), MAX_REVOKES_PER_CHECK);
        for id in expired {
            let raft = ctx.raft.clone();
            tokio::spawn(async move {
                let revoke = Request::LeaseRevoke(LeaseRevokeRequest { id });
                match raft.propose(revoke).await {
                    Ok(_) => tracing::debug!(id, "expired lease revoked"),
                    Err(err) => {
                        tracing::debug!(id, %err, "revoke of expired lease failed; will retry")
                    }
                }
            });
        }
    }
}
