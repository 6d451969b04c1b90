//! Membership changes meeting crashes: a member that joins a running
//! cluster is killed with SIGKILL at every stage of its catch-up (before
//! its first message, while the snapshot arrives, while it replays, after
//! it caught up) and must start again from what it persisted and catch up,
//! never exit on its own.

use std::time::{Duration, Instant};

use capstan_tests::cluster::{Cluster, Member};
use capstan_tests::writers::connect;
use etcd_client::GetOptions;

const KEYS: usize = 300;
const CATCH_UP: Duration = Duration::from_secs(30);

/// After `delay` of its life, the joiner is killed, then started again.
const KILL_AFTER: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_millis(30),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(600),
    Duration::from_millis(1500),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_joining_member_killed_at_any_stage_restarts_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &["--snapshot-count", "20"]);
    let mut client = connect(&cluster.urls()).await;
    for i in 0..KEYS {
        client
            .put(format!("k{i:04}"), "v".repeat(100), None)
            .await
            .unwrap();
    }
    for (round, delay) in KILL_AFTER.iter().enumerate() {
        let leader = cluster.wait_for_leader(Duration::from_secs(10));
        let index = (leader + 1) % cluster.members.len();
        let name = format!("j{round}");
        replace(&mut cluster, index, &name).await;
        tokio::time::sleep(*delay).await;
        let joiner = &mut cluster.members[index];
        joiner.kill9();
        joiner.start();
        wait_caught_up(joiner, KEYS).await;
        // Killed once more after catching up, it must come back as well.
        joiner.kill9();
        joiner.start();
        wait_caught_up(joiner, KEYS).await;
    }
}

/// Removes member `index`, wipes it and starts a new member `name` in its
/// slot, as an operator replacing a failed machine would.
async fn replace(cluster: &mut Cluster, index: usize, name: &str) {
    let survivors: Vec<String> = (0..cluster.members.len())
        .filter(|&m| m != index)
        .map(|m| cluster.members[m].url())
        .collect();
    let mut client = connect(&survivors).await;
    let members = client.member_list().await.expect("member list");
    let peer_url = cluster.members[index].peer_url();
    let old = members
        .members()
        .iter()
        .find(|m| m.peer_urls().contains(&peer_url))
        .expect("the old member is listed by its peer URL")
        .id();
    client
        .member_remove(old)
        .await
        .expect("remove the old member");
    cluster.members[index].kill9();
    std::fs::remove_dir_all(&cluster.members[index].data_dir).unwrap();
    let mut joiner = cluster.joiner(name);
    client
        .member_add([joiner.peer_url()], None)
        .await
        .expect("add the new member");
    joiner.start();
    cluster.members[index] = joiner;
}

/// Waits until `member` serves every key from its own state (a
/// serializable read); fails at once if it exits on its own.
async fn wait_caught_up(member: &mut Member, keys: usize) {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        if let Some(status) = member.exited() {
            panic!(
                "member {} exited on its own ({status}); its log:\n{}",
                member.name,
                tail(&member.log(), 60)
            );
        }
        if serves(member, keys).await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "member {} did not catch up within {CATCH_UP:?}; its log:\n{}",
            member.name,
            tail(&member.log(), 60)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn serves(member: &Member, keys: usize) -> bool {
    let options = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(1))
        .with_timeout(Duration::from_secs(2));
    let Ok(mut client) = etcd_client::Client::connect([member.url()], Some(options)).await else {
        return false;
    };
    let read = GetOptions::new()
        .with_prefix()
        .with_count_only()
        .with_serializable();
    client
        .get("k", Some(read))
        .await
        .is_ok_and(|r| r.count() as usize == keys)
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
