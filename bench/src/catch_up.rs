//! A new member's catch-up, after the scale run has loaded the server:
//! `member add` of a fresh member, then the time from its start until its
//! own revision (its `status`) reaches the revision the server had before
//! it was added. With many keys the leader's log has been cut behind a
//! snapshot by then (every `--snapshot-count` entries, 10,000 for
//! capstan-store and 100,000 for etcd 3.4), so the member catches up by
//! receiving that snapshot, not by replaying the log.

use std::time::{Duration, Instant};

use etcd_client::{Client, ClusterClient};

use crate::client::{connect_clients, header_revision, within};
use crate::servers::{Joiner, ServerProcess};

/// How often the new member's revision is asked for.
const POLL: Duration = Duration::from_millis(50);
/// Longest the added member's removal is tried.
const REMOVE_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, serde::Serialize)]
pub struct CatchUp {
    pub seconds: f64,
    pub revision: i64,
    /// The new member's data directory once it has caught up.
    pub disk_bytes: u64,
}

/// Adds a member to `server` and waits (up to `limit`) until it holds
/// everything the server held.
pub async fn add_member(
    server: &mut ServerProcess,
    timeout: Duration,
    limit: Duration,
) -> Result<CatchUp, String> {
    let joiner = Joiner::new(server.kind).map_err(|err| format!("free ports: {err}"))?;
    let clients = connect_clients(&server.endpoint(), 1, Some(timeout), timeout).await?;
    let mut kv = clients[0].kv_client();
    let target = header_revision(within(timeout, kv.get("catch-up", None)).await?.header());
    let mut cluster = clients[0].cluster_client();
    let added = within(timeout, cluster.member_add([joiner.peer_url()], None)).await?;
    let id = added
        .member()
        .map(|m| m.id())
        .ok_or("member add named no member")?;
    let started = Instant::now();
    server.start_joiner(&joiner)?;
    let caught = wait_for(&joiner.client_url(), target, started + limit).await;
    let seconds = started.elapsed().as_secs_f64();
    let disk_bytes = server.member_disk_bytes(&joiner.name);
    // The server goes back to its own members, so what runs after this
    // (the final health check) sees it as it was.
    remove(&mut cluster, id, timeout).await?;
    server.stop_joiner();
    Ok(CatchUp {
        seconds,
        revision: caught?,
        disk_bytes,
    })
}

/// Removes member `id`. etcd refuses to remove a member until the rest
/// have been connected to each other for a while ("unhealthy cluster"),
/// so a refusal is tried again for up to [`REMOVE_LIMIT`].
async fn remove(cluster: &mut ClusterClient, id: u64, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + REMOVE_LIMIT;
    loop {
        match within(timeout, cluster.member_remove(id)).await {
            Ok(_) => return Ok(()),
            Err(err) if Instant::now() > deadline => return Err(format!("member remove: {err}")),
            Err(_) => tokio::time::sleep(POLL * 10).await,
        }
    }
}

/// Polls the member at `url` until its revision is at least `target`.
async fn wait_for(url: &str, target: i64, deadline: Instant) -> Result<i64, String> {
    let mut client: Option<Client> = None;
    let mut last = String::from("not answering yet");
    while Instant::now() < deadline {
        if client.is_none() {
            client = Client::connect([url], None).await.ok();
        }
        if let Some(connected) = client.as_mut() {
            match within(POLL * 20, connected.status()).await {
                Ok(status) => {
                    let revision = header_revision(status.header());
                    if revision >= target {
                        return Ok(revision);
                    }
                    last = format!("at revision {revision} of {target}");
                }
                Err(err) => last = err,
            }
        }
        tokio::time::sleep(POLL).await;
    }
    Err(format!("the new member did not catch up: {last}"))
}
