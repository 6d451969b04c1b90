//! The access rules travel in a backup, both ways, as `etcdctl snapshot
//! restore` carries them between etcd clusters: saved from capstan and
//! restored into etcd 3.4, users, roles and auth stay as they were; saved
//! from etcd 3.4 and started by capstan-store (`--restore-snapshot`), the
//! passwords etcd hashed still log in. The file format is capstan's only
//! on one side, so this runs on capstan-store's side of the suite.

use std::path::Path;

use capstan_tests::etcdctl::{etcdctl, Run};
use capstan_tests::store::{on_reference_etcd, StoreProcess};

use super::members::{As, Members, ROOT};

const APP: &str = "--user=app:app-pw";
const ROOT_USER: &str = "--user=root:root-pw";

/// A new etcd member on `file`, restored with etcdctl.
fn etcd_restored_from(file: &str, dir: &Path) -> StoreProcess {
    let data_dir = dir.join("etcd-restored");
    let mut etcd = StoreProcess::unstarted_etcd(&data_dir);
    let peer = etcd.peer_url();
    let data_dir = data_dir.display().to_string();
    let args = [
        "snapshot",
        "restore",
        file,
        "--data-dir",
        &data_dir,
        "--name",
        "default",
        "--initial-cluster",
        &format!("default={peer}"),
        "--initial-advertise-peer-urls",
        &peer,
    ];
    let restore = etcdctl("127.0.0.1:1", &args, None);
    assert!(restore.ok, "etcdctl snapshot restore: {}", restore.stderr);
    etcd.restart();
    etcd
}

fn refused(run: Run, what: &str) -> String {
    assert!(!run.ok, "{what} should be refused, yet: {}", run.stdout);
    run.stderr
}

#[test]
fn the_rules_travel_in_a_backup_to_etcd_and_back() {
    if on_reference_etcd() {
        return; // --restore-snapshot is capstan-store's
    }
    let dir = tempfile::tempdir().unwrap();
    let capstan = Members::start(1, &[]);
    capstan.set_up_app_user_and_enable();
    capstan.ok(0, ROOT, &["put", "/app/saved", "v"]);
    let saved = dir.path().join("capstan.db").display().to_string();
    capstan.ok(0, ROOT, &["snapshot", "save", &saved]);

    let etcd = etcd_restored_from(&saved, dir.path());
    let endpoint = etcd.endpoint();
    let run = etcdctl(
        &endpoint,
        &[APP, "get", "/app/saved", "--print-value-only"],
        None,
    );
    assert!(
        run.ok && run.stdout.trim() == "v",
        "{}{}",
        run.stdout,
        run.stderr
    );
    let err = refused(
        etcdctl(&endpoint, &[APP, "put", "/other", "x"], None),
        "app outside",
    );
    assert!(err.contains("permission denied"), "{err}");
    let err = refused(
        etcdctl(&endpoint, &["get", "/app/saved"], None),
        "anonymous",
    );
    assert!(err.contains("user name is empty"), "{err}");

    // etcd's own rules and bcrypt hashes, into capstan.
    let from_etcd = dir.path().join("etcd.db").display().to_string();
    let run = etcdctl(
        &endpoint,
        &[ROOT_USER, "snapshot", "save", &from_etcd],
        None,
    );
    assert!(run.ok, "{}", run.stderr);
    drop(etcd);
    let restore = format!("--restore-snapshot={from_etcd}");
    let capstan = Members::start(1, &[&restore]);
    let value = capstan.ok(
        0,
        As::User("app", "app-pw"),
        &["get", "/app/saved", "--print-value-only"],
    );
    assert_eq!(value.trim(), "v");
    let err = capstan.refused(0, As::User("app", "app-pw"), &["put", "/other", "x"]);
    assert!(err.contains("etcdserver: permission denied"), "{err}");
    let err = capstan.refused(0, As::User("app", "wrong"), &["get", "/app/saved"]);
    assert!(err.contains("authentication failed"), "{err}");
}
