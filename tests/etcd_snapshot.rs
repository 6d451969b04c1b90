//! Moving data between capstan and the real etcd 3.4 with snapshots, both
//! ways: `etcdctl snapshot save` from capstan-store gives a file that
//! `etcdctl snapshot status` and `etcdctl snapshot restore` accept and
//! etcd serves; a snapshot saved from etcd starts capstan-store with
//! `--restore-snapshot`. Either way every key keeps its value, create and
//! mod revisions, version and lease, and the history and revision carry
//! over.

use std::path::Path;

use capstan_tests::etcdctl::{etcdctl, etcdctl_json, etcdctl_ok};
use capstan_tests::store::{refused_restore, StoreProcess};

/// Keys with history: overwritten, deleted, one on a lease, one bigger
/// than a page, and a transaction of several changes (sub-revisions).
fn write_history(endpoint: &str) -> String {
    for i in 0..20 {
        etcdctl_ok(
            endpoint,
            &["put", &format!("k{i:02}"), &format!("first {i}")],
        );
    }
    for i in 0..10 {
        etcdctl_ok(endpoint, &["put", &format!("k{i:02}"), "second"]);
    }
    etcdctl_ok(endpoint, &["del", "k19"]);
    let txn = "\nput t1 a\nput t2 b\ndel k18\n\n\n";
    let run = etcdctl(endpoint, &["txn"], Some(txn));
    assert!(
        run.ok && run.stdout.starts_with("SUCCESS"),
        "txn: {}",
        run.stderr
    );
    assert_eq!(run.stdout.matches("OK").count(), 2, "{}", run.stdout);
    // Bigger than a page: bbolt keeps it on overflow pages.
    etcdctl_ok(endpoint, &["put", "big", &"b".repeat(20_000)]);
    let granted = etcdctl_ok(endpoint, &["lease", "grant", "3600"]);
    let lease = granted.split_whitespace().nth(1).expect("a lease id");
    etcdctl_ok(endpoint, &["put", "leased", "x", "--lease", lease]);
    lease.to_string()
}

/// Every live key as the server reports it (value, revisions, version,
/// lease), and the revision it reports.
fn state(endpoint: &str) -> (i64, Vec<serde_json::Value>) {
    let answer = etcdctl_json(endpoint, &["get", "", "--prefix"]);
    let revision = answer["header"]["revision"].as_i64().expect("a revision");
    let kvs = answer["kvs"].as_array().cloned().unwrap_or_default();
    (revision, kvs)
}

/// What a past revision read returns: history must carry over too.
fn at_revision(endpoint: &str, key: &str, rev: i64) -> Vec<serde_json::Value> {
    let answer = etcdctl_json(endpoint, &["get", key, "--rev", &rev.to_string()]);
    answer["kvs"].as_array().cloned().unwrap_or_default()
}

fn save(endpoint: &str, dir: &Path) -> String {
    let file = dir.join("snapshot.db").to_str().unwrap().to_string();
    etcdctl_ok(endpoint, &["snapshot", "save", &file]);
    file
}

/// etcd's way to a new single-member cluster: `etcdctl snapshot restore`
/// into a new data directory, then etcd started on it.
fn restore_on_etcd(file: &str, dir: &Path) -> StoreProcess {
    let data_dir = dir.join("etcd-restored");
    let mut member = StoreProcess::unstarted_etcd(&data_dir);
    let peer = member.peer_url();
    let data = data_dir.to_str().expect("a UTF-8 path");
    let cluster = format!("default={peer}");
    let args = [
        "snapshot",
        "restore",
        file,
        "--data-dir",
        data,
        "--name",
        "default",
        "--initial-cluster",
        &cluster,
        "--initial-advertise-peer-urls",
        &peer,
    ];
    let restore = etcdctl("127.0.0.1:1", &args, None);
    assert!(restore.ok, "etcdctl snapshot restore: {}", restore.stderr);
    member.restart();
    member
}

/// `etcdctl snapshot status` of a snapshot of [`write_history`] saved
/// from a real etcd.
fn etcd_snapshot_of_the_same_history(dir: &Path) -> serde_json::Value {
    std::fs::create_dir_all(dir).expect("a folder for etcd");
    let mut etcd = StoreProcess::unstarted_etcd(&dir.join("data"));
    etcd.restart();
    write_history(&etcd.endpoint());
    let file = save(&etcd.endpoint(), dir);
    etcdctl_json("127.0.0.1:1", &["snapshot", "status", &file])
}

#[test]
fn a_capstan_snapshot_is_read_by_etcdctl_and_served_by_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let source = StoreProcess::start(&dir.path().join("capstan"), &[]);
    let endpoint = source.endpoint();
    write_history(&endpoint);
    let (saved_at, saved) = state(&endpoint);
    let file = save(&endpoint, dir.path());
    etcdctl_ok(&endpoint, &["put", "after-the-save", "y"]);

    let status = etcdctl_json("127.0.0.1:1", &["snapshot", "status", &file]);
    assert_eq!(status["revision"].as_i64(), Some(saved_at), "{status}");
    // The same history on etcd, saved the same way: the same revision,
    // and every pair of every bucket but the two etcd writes that capstan
    // leaves empty (the cluster bucket's clusterVersion and the auth
    // bucket's authRevision).
    let reference = etcd_snapshot_of_the_same_history(&dir.path().join("etcd"));
    assert_eq!(
        status["revision"], reference["revision"],
        "{status} vs etcd's {reference}"
    );
    let etcd_keys = reference["totalKey"].as_i64().expect("etcd's totalKey");
    assert_eq!(
        status["totalKey"].as_i64(),
        Some(etcd_keys - 2),
        "{status} vs etcd's {reference}"
    );

    let etcd = restore_on_etcd(&file, dir.path());
    let member = etcd.endpoint();
    assert_eq!(state(&member), (saved_at, saved.clone()));
    let old = at_revision(&member, "k00", 2);
    assert_eq!(old, at_revision(&endpoint, "k00", 2));
    assert!(old[0]["value"].is_string(), "history carries over: {old:?}");
    let deleted = at_revision(&member, "k19", saved_at);
    assert!(deleted.is_empty(), "a deletion carries over: {deleted:?}");
    let leases = etcdctl_ok(&member, &["lease", "list"]);
    assert!(leases.contains("found 1 leases"), "{leases}");
    let put = etcdctl_json(&member, &["put", "new", "z"]);
    assert_eq!(put["header"]["revision"].as_i64(), Some(saved_at + 1));
}

#[test]
fn an_etcd_snapshot_starts_capstan_with_the_same_keys_and_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = {
        let mut etcd = StoreProcess::unstarted_etcd(&dir.path().join("etcd"));
        etcd.restart();
        etcd
    };
    let endpoint = etcd.endpoint();
    write_history(&endpoint);
    etcdctl_ok(&endpoint, &["compact", "25"]);
    etcdctl_ok(&endpoint, &["put", "k05", "after the compaction"]);
    let (saved_at, saved) = state(&endpoint);
    let file = save(&endpoint, dir.path());

    let capstan = StoreProcess::start(&dir.path().join("capstan"), &["--restore-snapshot", &file]);
    let member = capstan.endpoint();
    assert_eq!(state(&member), (saved_at, saved));
    for rev in [25, 30, saved_at - 1] {
        assert_eq!(
            at_revision(&member, "k0", rev),
            at_revision(&endpoint, "k0", rev),
            "history at {rev}"
        );
        assert_eq!(
            at_revision(&member, "t", rev),
            at_revision(&endpoint, "t", rev)
        );
    }
    let compacted = etcdctl(&member, &["get", "k00", "--rev", "24"], None);
    assert!(
        compacted
            .stderr
            .contains("required revision has been compacted"),
        "{}",
        compacted.stderr
    );
    let leases = etcdctl_ok(&member, &["lease", "list"]);
    assert!(leases.contains("found 1 leases"), "{leases}");
    let members = etcdctl_ok(&member, &["member", "list"]);
    assert_eq!(members.lines().count(), 1, "the new cluster's: {members}");
    let put = etcdctl_json(&member, &["put", "new", "z"]);
    assert_eq!(put["header"]["revision"].as_i64(), Some(saved_at + 1));
}

#[test]
fn a_damaged_etcd_snapshot_does_not_start_capstan() {
    let dir = tempfile::tempdir().unwrap();
    let mut etcd = StoreProcess::unstarted_etcd(&dir.path().join("etcd"));
    etcd.restart();
    write_history(&etcd.endpoint());
    let file = save(&etcd.endpoint(), dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[4096 * 3 + 100] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let log = refused_restore(&dir.path().join("capstan"), &file);
    assert!(log.contains("SHA-256 does not match"), "{log}");
}
