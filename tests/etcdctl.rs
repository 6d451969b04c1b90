//! etcdctl 3.4 against a real `capstan-store` process.

use capstan_tests::etcdctl::{etcdctl_json, etcdctl_ok};
use capstan_tests::store::StoreProcess;

#[test]
fn put_then_get_shows_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreProcess::start(&dir.path().join("s"), &[]);
    let ep = store.endpoint();
    assert_eq!(etcdctl_ok(&ep, &["put", "foo", "bar"]).trim(), "OK");
    let json = etcdctl_json(&ep, &["get", "foo"]);
    let kv = &json["kvs"][0];
    assert_eq!(kv["create_revision"], 2);
    assert_eq!(kv["mod_revision"], 2);
    assert_eq!(kv["version"], 1);
    assert_eq!(json["header"]["revision"], 2);
}
