//! A membership change under load: a follower is removed from the
//! cluster, killed and wiped, and a new member with a new name, ports and
//! an empty data folder is added and started in its place (it catches up
//! from the others).

use std::time::{Duration, Instant};

use etcd_client::Client;

use super::FaultError;
use crate::cluster::Cluster;

const DEADLINE: Duration = Duration::from_secs(60);

/// Replaces member `index` with a new member `name`, keeping its slot in
/// `cluster.members`.
pub fn replace_member(cluster: &mut Cluster, index: usize, name: &str) -> Result<(), FaultError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for member changes");
    let survivors: Vec<String> = (0..cluster.members.len())
        .filter(|&m| m != index)
        .map(|m| cluster.members[m].url())
        .collect();
    let old = cluster.members[index].peer_url();
    runtime.block_on(until_done("remove a member", || {
        remove(survivors.clone(), old.clone())
    }))?;
    cluster.members[index].kill9();
    let _ = std::fs::remove_dir_all(&cluster.members[index].data_dir);
    let mut joiner = cluster.joiner(name);
    let peer_url = joiner.peer_url();
    runtime.block_on(until_done("add a member", || {
        add(survivors.clone(), name.to_string(), peer_url.clone())
    }))?;
    joiner.start();
    cluster.members[index] = joiner;
    Ok(())
}

/// Retries a member change until it reports done, or fails at the
/// deadline. Each attempt first looks whether an earlier, ambiguous one
/// already took effect, since member changes are not idempotent.
async fn until_done<F, Fut>(what: &str, mut attempt: F) -> Result<(), FaultError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if attempt().await.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(FaultError::Command {
        command: what.to_string(),
        detail: format!("not done within {DEADLINE:?}"),
    })
}

async fn client(urls: Vec<String>) -> Option<Client> {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    Client::connect(urls, Some(options)).await.ok()
}

/// Some(()) once no member has `peer_url`. Members are found by peer URL,
/// not by name: a member that has not yet published its name (one that
/// joined moments ago) is listed without one, and taking it for already
/// removed would leave a dead voter in the cluster.
async fn remove(urls: Vec<String>, peer_url: String) -> Option<()> {
    let mut etcd = client(urls).await?;
    let members = etcd.member_list().await.ok()?;
    let found = members
        .members()
        .iter()
        .find(|m| m.peer_urls().contains(&peer_url));
    let Some(member) = found else {
        return Some(());
    };
    etcd.member_remove(member.id()).await.ok().map(|_| ())
}

/// Some(()) once a member has `peer_url` (named or not yet started).
async fn add(urls: Vec<String>, name: String, peer_url: String) -> Option<()> {
    let mut etcd = client(urls).await?;
    let members = etcd.member_list().await.ok()?;
    let known = members
        .members()
        .iter()
        .any(|m| m.name() == name || m.peer_urls().contains(&peer_url));
    if known {
        return Some(());
    }
    etcd.member_add([peer_url], None).await.ok().map(|_| ())
}
