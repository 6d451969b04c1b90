//! Where a cluster's leader sits during a timed run.
//!
//! The timed clients talk to the first member. A linearizable read or a
//! write that arrives at a follower takes one more round trip (to the
//! leader and back) than at the leader, so at one client the election's
//! outcome alone moved a 3-member ratio between 0.67x and 1.00x. Before
//! every run both servers get their leader onto the first member, with
//! etcd's `MoveLeader`, as `etcdctl move-leader` would.

use std::time::Duration;

use etcd_client::Client;
use tokio::time::{sleep, Instant};

use crate::client::within;

/// One member's view: its own id and the leader it knows of (0: none).
async fn status(endpoint: &str, limit: Duration) -> Result<(u64, u64), String> {
    let mut client = within(limit, Client::connect([endpoint], None)).await?;
    let status = within(limit, client.status()).await?;
    let member = status.header().map_or(0, |h| h.member_id());
    Ok((member, status.leader()))
}

/// Makes the first of `endpoints` the leader, unless it is already, and
/// waits until it says so. Returns whether leadership had to move.
pub(crate) async fn lead_from_first(endpoints: &[String], limit: Duration) -> Result<bool, String> {
    let Some(first) = endpoints.first() else {
        return Ok(false);
    };
    let (first_id, leader) = status(first, limit).await?;
    if leader == first_id {
        return Ok(false);
    }
    let mut leader_endpoint = None;
    for endpoint in endpoints {
        if status(endpoint, limit).await?.0 == leader {
            leader_endpoint = Some(endpoint);
        }
    }
    let leader_endpoint =
        leader_endpoint.ok_or_else(|| format!("no member is the leader {leader:x}"))?;
    let mut client = within(limit, Client::connect([leader_endpoint], None)).await?;
    within(limit, client.move_leader(first_id)).await?;
    let deadline = Instant::now() + limit;
    loop {
        let (_, leader) = status(first, limit).await?;
        if leader == first_id {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{first} does not lead {limit:?} after MoveLeader (leader {leader:x})"
            ));
        }
        sleep(Duration::from_millis(20)).await;
    }
}
