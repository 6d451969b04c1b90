//! Backups with etcdctl: `etcdctl snapshot save` from a running member,
//! then a new cluster started from the file holds exactly the saved state
//! (keys, history, leases, revision) under its own membership; a damaged
//! file is refused.
//!
//! The file is etcd's (a bbolt database and its SHA-256; tests/etcd_snapshot.rs
//! moves it between capstan and etcd); capstan restores it by starting
//! members with `--restore-snapshot`. On the reference etcd
//! (`CAPSTAN_TEST_SERVER=etcd`) the same tests check etcd's way instead:
//! `etcdctl snapshot restore` into a data directory, then etcd started on it.

use std::path::Path;

use capstan_tests::cluster::Cluster;
use capstan_tests::etcdctl::{etcdctl, etcdctl_json, etcdctl_ok, json_keys};
use capstan_tests::store::{on_reference_etcd, refused_restore, StoreProcess};

/// Keys with history: overwritten, deleted, and one on a lease.
fn write_history(endpoint: &str) {
    for i in 0..20 {
        etcdctl_ok(endpoint, &["put", &format!("k{i:02}"), "first"]);
    }
    for i in 0..10 {
        etcdctl_ok(endpoint, &["put", &format!("k{i:02}"), "second"]);
    }
    etcdctl_ok(endpoint, &["del", "k19"]);
    let granted = etcdctl_ok(endpoint, &["lease", "grant", "3600"]);
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("lease id")
        .to_string();
    etcdctl_ok(endpoint, &["put", "leased", "x", "--lease", &lease]);
}

fn revision(endpoint: &str) -> i64 {
    let status = etcdctl_json(endpoint, &["get", "k00"]);
    status["header"]["revision"].as_i64().expect("a revision")
}

/// What a restored member must hold: the saved revision, keys, history
/// and lease, under a membership of `members`.
fn check_restored(member: &str, saved_at: i64, saved_keys: &[String], members: usize) {
    assert_eq!(revision(member), saved_at, "the revision carries over");
    let keys = json_keys(&etcdctl_json(member, &["get", "", "--prefix"]));
    assert_eq!(keys, saved_keys, "exactly the saved keys on {member}");
    let old = etcdctl_ok(member, &["get", "k00", "--rev", "2"]);
    assert!(old.contains("first"), "history before the save: {old}");
    let leases = etcdctl_ok(member, &["lease", "list"]);
    assert!(leases.contains("found 1 leases"), "{leases}");
    let list = etcdctl_ok(member, &["member", "list"]);
    assert_eq!(list.lines().count(), members, "the new membership: {list}");
}

/// etcd's way: `etcdctl snapshot restore` into a new data directory for a
/// new single-member cluster, then etcd started on it.
fn restore_on_etcd(file: &str, dir: &Path) -> StoreProcess {
    let data_dir = dir.join("restored");
    let mut member = StoreProcess::unstarted(&data_dir, &[]);
    let peer = member.peer_url();
    let restore = etcdctl(
        "127.0.0.1:1",
        &[
            "snapshot",
            "restore",
            file,
            "--data-dir",
            data_dir.to_str().expect("a UTF-8 path"),
            "--name",
            "default",
            "--initial-cluster",
            &format!("default={peer}"),
            "--initial-advertise-peer-urls",
            &peer,
        ],
        None,
    );
    assert!(restore.ok, "etcdctl snapshot restore: {}", restore.stderr);
    member.restart();
    member
}

#[test]
fn a_saved_snapshot_restores_into_a_new_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let source = StoreProcess::start(&dir.path().join("source"), &[]);
    let endpoint = source.endpoint();
    write_history(&endpoint);
    let saved_at = revision(&endpoint);
    let saved_keys = json_keys(&etcdctl_json(&endpoint, &["get", "", "--prefix"]));
    let file = dir.path().join("backup.db");
    let file = file.to_str().unwrap();
    etcdctl_ok(&endpoint, &["snapshot", "save", file]);
    etcdctl_ok(&endpoint, &["put", "after-the-backup", "y"]);

    if on_reference_etcd() {
        let restored = restore_on_etcd(file, dir.path());
        let member = restored.endpoint();
        check_restored(&member, saved_at, &saved_keys, 1);
        let put = etcdctl_json(&member, &["put", "new", "z"]);
        assert_eq!(put["header"]["revision"].as_i64(), Some(saved_at + 1));
        return;
    }
    let restored_dir = dir.path().join("restored");
    std::fs::create_dir_all(&restored_dir).unwrap();
    let restored = Cluster::start(&restored_dir, 3, &["--restore-snapshot", file]);
    for member in restored.members.iter().map(|m| m.endpoint()) {
        check_restored(&member, saved_at, &saved_keys, 3);
    }
    let first = restored.members[0].endpoint();
    let put = etcdctl_json(&first, &["put", "new", "z"]);
    assert_eq!(put["header"]["revision"].as_i64(), Some(saved_at + 1));
    let hashes: Vec<i64> = restored
        .members
        .iter()
        .map(|m| {
            let hash = etcdctl_json(&m.endpoint(), &["endpoint", "hashkv"]);
            hash[0]["HashKV"]["hash"].as_i64().expect("a hash")
        })
        .collect();
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "members agree: {hashes:?}"
    );
}

#[test]
fn a_damaged_snapshot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = StoreProcess::start(&dir.path().join("source"), &[]);
    write_history(&source.endpoint());
    let file = dir.path().join("backup.db");
    etcdctl_ok(
        &source.endpoint(),
        &["snapshot", "save", file.to_str().unwrap()],
    );
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[40] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    if on_reference_etcd() {
        let target = dir.path().join("restored");
        let file = file.to_str().unwrap();
        let args = [
            "snapshot",
            "restore",
            file,
            "--data-dir",
            target.to_str().unwrap(),
        ];
        let run = etcdctl("127.0.0.1:1", &args, None);
        assert!(!run.ok, "etcdctl must refuse a damaged snapshot");
        assert!(run.stderr.contains("sha256"), "{}", run.stderr);
        return;
    }

    let log = refused_restore(&dir.path().join("restored"), &file);
    assert!(log.contains("SHA-256 does not match"), "{log}");
}
