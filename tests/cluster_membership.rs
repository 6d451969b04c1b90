//! Membership of replicated `capstan-store` clusters: a wiped member
//! re-added catches up through a snapshot, and etcdctl moves the leader,
//! adds, promotes, updates and removes members.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::etcdctl::{etcdctl, etcdctl_ok};
use capstan_tests::writers::{connect, wait_converged};
use etcd_client::GetOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_member_readded_catches_up_through_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &["--snapshot-count", "10"]);
    let mut client = connect(&cluster.urls()).await;
    for i in 0..100 {
        client.put(format!("s{i:03}"), "v", None).await.unwrap();
    }
    // A follower is wiped; removing the leader itself would add an
    // election to the test, which is not what it is about.
    let leader = cluster.wait_for_leader(Duration::from_secs(10));
    let wiped = (leader + 1) % 3;
    let members = client.member_list().await.unwrap();
    let victim = members
        .members()
        .iter()
        .find(|m| m.name() == cluster.members[wiped].name)
        .unwrap()
        .id();
    let survivor_urls: Vec<String> = (0..3)
        .filter(|i| *i != wiped)
        .map(|i| cluster.members[i].url())
        .collect();
    let mut survivors = connect(&survivor_urls).await;
    survivors
        .member_remove(victim)
        .await
        .expect("remove the member");
    cluster.members[wiped].kill9();
    std::fs::remove_dir_all(&cluster.members[wiped].data_dir).unwrap();

    let mut joiner = cluster.joiner("m3");
    survivors
        .member_add([joiner.peer_url()], None)
        .await
        .expect("add m3");
    joiner.start();
    let mut urls = survivor_urls.clone();
    urls.push(joiner.url());
    wait_converged(&urls, Duration::from_secs(20)).await;
    let mut on_joiner = connect(&[joiner.url()]).await;
    let resp = on_joiner
        .get("s", Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .unwrap();
    assert_eq!(resp.count(), 100);
    let applied = joiner.gauge("raft_snapshots_applied_total");
    assert!(
        applied.is_some_and(|n| n >= 1),
        "the joiner should catch up by snapshot (snapshots applied: {applied:?})"
    );
}

/// Member ids by name, from `etcdctl member list` (ids are hex there).
fn member_ids(endpoints: &str) -> HashMap<String, String> {
    etcdctl_ok(endpoints, &["member", "list"])
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(", ").collect();
            (fields.len() >= 3).then(|| (fields[2].to_string(), fields[0].to_string()))
        })
        .collect()
}

fn leader_endpoint(endpoints: &str) -> String {
    etcdctl_ok(endpoints, &["endpoint", "status"])
        .lines()
        .find(|line| line.split(", ").nth(4) == Some("true"))
        .and_then(|line| line.split(", ").next())
        .expect("a leader in endpoint status")
        .to_string()
}

#[test]
fn etcdctl_moves_the_leader_and_adds_promotes_and_removes_a_member() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let endpoints: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let all = endpoints.join(",");
    let ids = member_ids(&all);
    assert_eq!(ids.len(), 3);
    // Members publish their client URLs through raft shortly after start.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = etcdctl_ok(&all, &["member", "list"]);
        if cluster.members.iter().all(|m| list.contains(&m.url())) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "client URLs not published: {list}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let leader = leader_endpoint(&all);
    let target = cluster
        .members
        .iter()
        .find(|m| m.endpoint() != leader)
        .unwrap();
    let moved = etcdctl_ok(&leader, &["move-leader", &ids[&target.name]]);
    assert!(moved.contains("Leadership transferred"), "{moved}");
    assert_eq!(leader_endpoint(&all), target.endpoint());

    let mut joiner = cluster.joiner("m9");
    let added = etcdctl_ok(
        &all,
        &[
            "member",
            "add",
            "m9",
            &format!("--peer-urls={}", joiner.peer_url()),
            "--learner",
        ],
    );
    assert!(
        added.contains("ETCD_INITIAL_CLUSTER_STATE=\"existing\""),
        "{added}"
    );
    let new_id = member_ids(&all)
        .into_iter()
        .find(|(_, id)| !ids.values().any(|known| known == id))
        .map(|(_, id)| id)
        .expect("the learner is listed");
    // Not started, so not in sync: refused, also when asked of a follower
    // (which has to ask the leader how far the learner got).
    let current = leader_endpoint(&all);
    let follower = cluster
        .members
        .iter()
        .find(|m| m.endpoint() != current)
        .unwrap()
        .endpoint();
    let early = etcdctl(&follower, &["member", "promote", &new_id], None);
    assert!(
        !early.ok && early.stderr.contains("in sync with leader"),
        "a learner that never ran must not be promoted: {}",
        early.stderr
    );
    joiner.start();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let promoted = etcdctl(&all, &["member", "promote", &new_id], None);
        if promoted.ok {
            break;
        }
        // etcd refuses to promote a learner that has not caught up; so may we.
        assert!(
            Instant::now() < deadline,
            "promote failed: {}",
            promoted.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Right after its promotion the new voter may briefly know no leader
    // ("etcdserver: no leader", Unavailable); clients retry that.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let put = etcdctl(
            &joiner.endpoint(),
            &["put", "from-the-new-member", "v"],
            None,
        );
        if put.ok {
            break;
        }
        assert!(
            put.stderr.contains("no leader") && Instant::now() < deadline,
            "put through the new member failed: {}",
            put.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let removed = etcdctl_ok(&all, &["member", "remove", &new_id]);
    assert!(removed.contains("removed"), "{removed}");
    assert_eq!(member_ids(&all).len(), 3);
    assert_eq!(
        etcdctl_ok(&all, &["get", "from-the-new-member", "--print-value-only"]).trim(),
        "v"
    );
}

/// `etcdctl member update`: a stopped member restarts on a new peer port
/// and, once the cluster knows its new URL, replicates again; a URL of
/// another member is refused.
#[test]
fn etcdctl_member_update_moves_a_member_to_new_peer_urls() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let leader = cluster.wait_for_leader(Duration::from_secs(20));
    let moved = (leader + 1) % 3;
    let others: Vec<String> = (0..3)
        .filter(|i| *i != moved)
        .map(|i| cluster.members[i].endpoint())
        .collect();
    let others = others.join(",");
    let id = member_ids(&others)[&cluster.members[moved].name].clone();

    let taken = cluster.members[leader].peer_url();
    let refused = etcdctl(
        &others,
        &["member", "update", &id, &format!("--peer-urls={taken}")],
        None,
    );
    assert!(
        !refused.ok && refused.stderr.contains("Peer URLs already exists"),
        "{}",
        refused.stderr
    );

    cluster.members[moved].kill9();
    cluster.members[moved].peer_port = capstan_tests::free_port();
    let new_url = cluster.members[moved].peer_url();
    etcdctl_ok(
        &others,
        &["member", "update", &id, &format!("--peer-urls={new_url}")],
    );
    let listed = etcdctl_ok(&others, &["member", "list"]);
    assert!(listed.contains(&new_url), "{listed}");
    cluster.members[moved].start();

    etcdctl_ok(&others, &["put", "after-the-move", "here"]);
    let endpoint = cluster.members[moved].endpoint();
    // Generous: a guard against hanging (20 s was once too short with the
    // other cluster tests loading two cores), not a measure of speed.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let read = etcdctl(
            &endpoint,
            &["get", "after-the-move", "--print-value-only"],
            None,
        );
        if read.ok && read.stdout.trim() == "here" {
            break;
        }
        if Instant::now() >= deadline {
            for m in &cluster.members {
                eprintln!("===== log of {} =====\n{}", m.name, m.log());
            }
            panic!("the moved member never caught up: {}", read.stderr);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
