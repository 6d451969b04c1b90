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

/// A client of one member, with that member's status (see [`status`]).
async fn connect(endpoint: &str, limit: Duration) -> Result<(Client, (u64, u64)), String> {
    let mut client = within(limit, Client::connect([endpoint], None)).await?;
    let status = status(&mut client, limit).await?;
    Ok((client, status))
}

/// The member's own id and the leader it knows of (0: none).
async fn status(client: &mut Client, limit: Duration) -> Result<(u64, u64), String> {
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
    let (mut first_client, (first_id, leader)) = connect(first, limit).await?;
    if leader == first_id {
        return Ok(false);
    }
    let mut leader_client = None;
    for endpoint in &endpoints[1..] {
        let (client, (id, _)) = connect(endpoint, limit).await?;
        if id == leader {
            leader_client = Some(client);
            break;
        }
    }
    let mut leader_client =
        leader_client.ok_or_else(|| format!("no member is the leader {leader:x}"))?;
    within(limit, leader_client.move_leader(first_id)).await?;
    let deadline = Instant::now() + limit;
    loop {
        let (_, leader) = status(&mut first_client, limit).await?;
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
