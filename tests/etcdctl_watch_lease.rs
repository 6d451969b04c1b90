//! etcdctl 3.4 against a real `capstan-store` process: watches, reads
//! and watches around compaction, leases, endpoint status and member
//! list.

use std::time::{Duration, Instant};

use capstan_tests::etcdctl::{
    etcdctl, etcdctl_err, etcdctl_json, etcdctl_ok, grant, json_text, lines, put, revision,
};
use capstan_tests::etcdctl_watch::WatchProcess;
use capstan_tests::poll::wait_for;
use capstan_tests::store::TempStore;

const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
const FUTURE: &str = "etcdserver: mvcc: required revision is a future revision";
const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";

#[test]
fn watch_prefix_with_prev_kv_streams_puts_and_deletes() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "w/a", "0"); // rev 2, before the watch
    let start = (revision(&ep) + 1).to_string();
    let watch = WatchProcess::spawn(
        &ep,
        &["w/", "--prefix", "--prev-kv", &format!("--rev={start}")],
    );
    put(&ep, "w/a", "1");
    put(&ep, "other", "x");
    put(&ep, "w/b", "2");
    assert_eq!(etcdctl_ok(&ep, &["del", "w/a"]).trim(), "1");
    let expected = [
        "PUT", "w/a", "0", "w/a", "1", // prev, then new
        "PUT", "w/b", "2", // a create has no prev
        "DELETE", "w/a", "1", "w/a", "", // prev, then the tombstone
    ];
    let got = watch.wait_for_lines(expected.len(), Duration::from_secs(10));
    assert_eq!(got, expected);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        watch.lines().len(),
        expected.len(),
        "no extra events: {:?}",
        watch.lines()
    );
}

#[test]
fn watch_rev_replays_history_in_order_then_follows_live() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "h", "1"); // rev 2
    put(&ep, "h", "2"); // rev 3
    assert_eq!(etcdctl_ok(&ep, &["del", "h"]).trim(), "1"); // rev 4
    put(&ep, "h", "3"); // rev 5
    let watch = WatchProcess::spawn(&ep, &["h", "--rev=3"]);
    let history = ["PUT", "h", "2", "DELETE", "h", "", "PUT", "h", "3"];
    assert_eq!(
        watch.wait_for_lines(history.len(), Duration::from_secs(10)),
        history
    );
    put(&ep, "h", "4");
    let all = watch.wait_for_lines(history.len() + 3, Duration::from_secs(10));
    assert_eq!(all[history.len()..], ["PUT", "h", "4"]);
}

#[test]
fn reads_below_compaction_or_above_current_fail_with_etcd_errors() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    for value in ["1", "2", "3", "4"] {
        put(&ep, "c", value); // revs 2..=5
    }
    assert_eq!(
        etcdctl_ok(&ep, &["compact", "4"]).trim(),
        "compacted revision 4"
    );
    assert!(etcdctl_err(&ep, &["get", "c", "--rev=3"]).contains(&format!("Error: {COMPACTED}")));
    assert!(etcdctl_err(&ep, &["get", "c", "--rev=2"]).contains(COMPACTED));
    // The compaction revision itself and later ones stay readable.
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "c", "--rev=4"])),
        ["c", "3"]
    );
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "c", "--rev=5"])),
        ["c", "4"]
    );
    assert!(etcdctl_err(&ep, &["get", "c", "--rev=6"]).contains(&format!("Error: {FUTURE}")));
    assert!(etcdctl_err(&ep, &["get", "c", "--rev=1000"]).contains(FUTURE));
    // Compacting again at or below the compaction point, or into the future.
    assert!(etcdctl_err(&ep, &["compact", "4"]).contains(COMPACTED));
    assert!(etcdctl_err(&ep, &["compact", "3"]).contains(COMPACTED));
    assert!(etcdctl_err(&ep, &["compact", "99"]).contains(FUTURE));
    assert_eq!(
        revision(&ep),
        5,
        "failed requests and compaction do not bump the revision"
    );
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "c"])), ["c", "4"]);
}

#[test]
fn watch_from_a_compacted_revision_is_canceled() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    for value in ["1", "2", "3"] {
        put(&ep, "c", value); // revs 2..=4
    }
    etcdctl_ok(&ep, &["compact", "4"]);
    let mut watch = WatchProcess::spawn(&ep, &["c", "--rev=2"]);
    let (status, stderr) = watch.wait_for_exit(Duration::from_secs(10));
    assert!(!status.success(), "etcdctl watch must fail");
    assert!(watch.lines().is_empty(), "no events: {:?}", watch.lines());
    assert!(
        stderr.contains(&format!("watch was canceled ({COMPACTED})")),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains("watch is canceled by the server"),
        "stderr: {stderr}"
    );
    // From the compaction revision on, the watch works.
    let ok = WatchProcess::spawn(&ep, &["c", "--rev=4"]);
    assert_eq!(
        ok.wait_for_lines(3, Duration::from_secs(10)),
        ["PUT", "c", "3"]
    );
}

#[test]
fn lease_grant_keepalive_timetolive_list_and_revoke() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    let other = grant(&ep, 60);
    let granted_at = std::time::Instant::now();
    let id = grant(&ep, 30);
    etcdctl_ok(&ep, &["put", "lk1", "v", &format!("--lease={id}")]);
    etcdctl_ok(&ep, &["put", "lk2", "v", &format!("--lease={id}")]);
    put(&ep, "plain", "v");
    let ttl = etcdctl_json(&ep, &["lease", "timetolive", &id, "--keys"]);
    assert_eq!(ttl["granted-ttl"], 30);
    let remaining = ttl["ttl"].as_i64().unwrap();
    // No more than the time since the grant has run off (plus rounding).
    let lowest = 30 - granted_at.elapsed().as_secs() as i64 - 1;
    assert!(
        (lowest..=30).contains(&remaining),
        "remaining TTL {remaining} with at least {lowest} due"
    );
    let mut keys: Vec<String> = ttl["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(json_text)
        .collect();
    keys.sort();
    assert_eq!(keys, ["lk1", "lk2"]);
    let text = etcdctl_ok(&ep, &["lease", "timetolive", &id, "--keys"]);
    assert!(
        text.starts_with(&format!("lease {id} granted with TTL(30s), remaining(")),
        "{text}"
    );
    assert!(text.contains("attached keys(["), "{text}");
    let kv = etcdctl_json(&ep, &["get", "lk1"]);
    assert_eq!(
        format!("{:016x}", kv["kvs"][0]["lease"].as_i64().unwrap()),
        id,
        "key carries its lease (etcdctl prints lease ids as %016x)"
    );
    assert_eq!(
        etcdctl_ok(&ep, &["lease", "keep-alive", "--once", &id]).trim(),
        format!("lease {id} keepalived with TTL(30)")
    );
    let list = etcdctl_ok(&ep, &["lease", "list"]);
    assert_eq!(lines(&list)[0], "found 2 leases");
    let mut listed = lines(&list)[1..].to_vec();
    listed.sort();
    let mut both = vec![id.as_str(), other.as_str()];
    both.sort();
    assert_eq!(listed, both);
    let before = revision(&ep);
    assert_eq!(
        etcdctl_ok(&ep, &["lease", "revoke", &id]).trim(),
        format!("lease {id} revoked")
    );
    assert_eq!(
        revision(&ep),
        before + 1,
        "revoking deletes both keys in one revision"
    );
    assert_eq!(etcdctl_ok(&ep, &["get", "lk", "--prefix"]), "");
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "plain"])), ["plain", "v"]);
    assert_eq!(
        etcdctl_ok(&ep, &["lease", "timetolive", &id]).trim(),
        format!("lease {id} already expired")
    );
    assert!(etcdctl_err(&ep, &["lease", "revoke", &id]).contains(LEASE_NOT_FOUND));
    assert!(etcdctl_err(&ep, &["lease", "keep-alive", "--once", &id]).contains(LEASE_NOT_FOUND));
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["lease", "list"])),
        ["found 1 leases", other.as_str()]
    );
}

#[test]
fn key_with_a_short_lease_vanishes_after_the_ttl() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    let granted_at = Instant::now();
    let id = grant(&ep, 2);
    etcdctl_ok(&ep, &["put", "ephemeral", "v", &format!("--lease={id}")]);
    put(&ep, "durable", "v");
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "ephemeral"])),
        ["ephemeral", "v"]
    );
    wait_for(Duration::from_secs(10), "the leased key to expire", || {
        etcdctl_ok(&ep, &["get", "ephemeral"])
            .is_empty()
            .then_some(())
    });
    let gone_after = granted_at.elapsed();
    assert!(
        gone_after >= Duration::from_secs(2),
        "expired early, after {gone_after:?}"
    );
    eprintln!("leased key expired after {gone_after:?}");
    assert_eq!(
        etcdctl_ok(&ep, &["lease", "timetolive", &id]).trim(),
        format!("lease {id} already expired")
    );
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "durable"])),
        ["durable", "v"]
    );
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["lease", "list"])),
        ["found 0 leases"]
    );
}

#[test]
fn endpoint_status_reports_leader_raft_index_and_revision() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    let status = |ep: &str| etcdctl_json(ep, &["endpoint", "status"])[0]["Status"].clone();
    let first = status(&ep);
    assert_eq!(
        first["leader"], first["header"]["member_id"],
        "a single member leads itself: {first}"
    );
    assert_eq!(first["header"]["revision"], 1);
    let index = first["raftIndex"].as_u64().expect("raftIndex");
    assert!(index >= 1, "{first}");
    assert!(first["raftTerm"].as_u64().unwrap_or(0) >= 1, "{first}");
    assert!(first["dbSize"].as_i64().unwrap_or(0) > 0, "{first}");
    put(&ep, "a", "1");
    put(&ep, "b", "2");
    let second = status(&ep);
    assert_eq!(second["header"]["revision"], 3);
    let later = second["raftIndex"].as_u64().unwrap();
    assert!(
        later >= index + 2,
        "two writes are two raft entries: {index} -> {later}"
    );
    let table = etcdctl_ok(&ep, &["endpoint", "status"]);
    assert!(table.starts_with(&format!("{ep}, ")), "{table}");
    let health = etcdctl(&ep, &["endpoint", "health"], None);
    assert!(health.ok, "{}", health.stderr);
    let said = format!("{}{}", health.stdout, health.stderr);
    assert!(said.contains(&format!("{ep} is healthy")), "{said}");
}

#[test]
fn member_list_shows_the_single_member_and_its_urls() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    let json = etcdctl_json(&ep, &["member", "list"]);
    let members = json["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{json}");
    let member = &members[0];
    assert_eq!(member["ID"], json["header"]["member_id"]);
    assert_eq!(member["clientURLs"], serde_json::json!([store.url()]));
    assert_eq!(
        member["peerURLs"],
        serde_json::json!([format!("http://127.0.0.1:{}", store.peer_port)])
    );
    let id = format!("{:x}", member["ID"].as_u64().unwrap());
    let table = etcdctl_ok(&ep, &["member", "list"]);
    let name = member["name"].as_str().unwrap();
    let peer = format!("http://127.0.0.1:{}", store.peer_port);
    assert_eq!(
        table.trim(),
        format!("{id}, started, {name}, {peer}, {}, false", store.url())
    );
}
