//! etcdctl 3.4 against a real `capstan-store` process.

use std::time::{Duration, Instant};

use capstan_tests::etcdctl::{
    etcdctl, etcdctl_err, etcdctl_json, etcdctl_ok, json_keys, json_text, lines,
};
use capstan_tests::etcdctl_watch::WatchProcess;
use capstan_tests::poll::wait_for;
use capstan_tests::store::{StoreProcess, TempStore};

const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
const FUTURE: &str = "etcdserver: mvcc: required revision is a future revision";
const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";

fn put(ep: &str, key: &str, value: &str) {
    assert_eq!(
        etcdctl_ok(ep, &["put", key, value]).trim(),
        "OK",
        "put {key}"
    );
}

/// The store revision, from the header of a read.
fn revision(ep: &str) -> i64 {
    etcdctl_json(ep, &["get", "capstan-tests/probe"])["header"]["revision"]
        .as_i64()
        .expect("header revision")
}

/// `lease grant <ttl>`; returns the lease id in hex as etcdctl prints it.
fn grant(ep: &str, ttl: u32) -> String {
    let out = etcdctl_ok(ep, &["lease", "grant", &ttl.to_string()]);
    let id = out
        .strip_prefix("lease ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected lease grant output {out:?}"));
    assert_eq!(out.trim(), format!("lease {id} granted with TTL({ttl}s)"));
    id.to_string()
}

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

#[test]
fn get_prefix_from_key_and_range_select_the_right_keys() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    for (key, value) in [
        ("b", "4"),
        ("a/2", "2"),
        ("ab", "3"),
        ("a/1", "1"),
        ("a", "0"),
    ] {
        put(&ep, key, value);
    }
    let get = |args: &[&str]| etcdctl_ok(&ep, &[&["get"], args].concat());
    assert_eq!(lines(&get(&["a/", "--prefix"])), ["a/1", "1", "a/2", "2"]);
    assert_eq!(
        lines(&get(&["a", "--prefix"])),
        ["a", "0", "a/1", "1", "a/2", "2", "ab", "3"]
    );
    assert_eq!(
        lines(&get(&["a/2", "--from-key"])),
        ["a/2", "2", "ab", "3", "b", "4"]
    );
    // `get key range_end` is the half-open range [key, range_end).
    assert_eq!(lines(&get(&["a/1", "ab"])), ["a/1", "1", "a/2", "2"]);
    assert_eq!(lines(&get(&["a"])), ["a", "0"]);
    assert_eq!(get(&["a/3"]), "", "a missing key prints nothing");
    assert_eq!(get(&["c", "--prefix"]), "");
}

#[test]
fn get_rev_reads_each_older_version() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "k", "v1"); // rev 2
    put(&ep, "k", "v2"); // rev 3
    assert_eq!(etcdctl_ok(&ep, &["del", "k"]).trim(), "1"); // rev 4
    put(&ep, "k", "v3"); // rev 5
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "k", "--rev=2"])),
        ["k", "v1"]
    );
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "k", "--rev=3"])),
        ["k", "v2"]
    );
    assert_eq!(
        etcdctl_ok(&ep, &["get", "k", "--rev=4"]),
        "",
        "deleted at rev 4"
    );
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "k", "--rev=5"])),
        ["k", "v3"]
    );
    let old = etcdctl_json(&ep, &["get", "k", "--rev=3"]);
    assert_eq!(
        old["header"]["revision"], 5,
        "a historical read reports the current revision"
    );
    assert_eq!(old["kvs"][0]["create_revision"], 2);
    assert_eq!(old["kvs"][0]["mod_revision"], 3);
    assert_eq!(old["kvs"][0]["version"], 2);
    let now = etcdctl_json(&ep, &["get", "k"]);
    assert_eq!(
        now["kvs"][0]["create_revision"], 5,
        "re-created after the delete"
    );
    assert_eq!(now["kvs"][0]["version"], 1);
}

#[test]
fn get_limit_reports_more_and_the_full_count() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    for key in ["s/c", "s/a", "s/b", "t"] {
        put(&ep, key, "v");
    }
    assert_eq!(
        lines(&etcdctl_ok(&ep, &["get", "s/", "--prefix", "--limit=2"])),
        ["s/a", "v", "s/b", "v"]
    );
    let json = etcdctl_json(&ep, &["get", "s/", "--prefix", "--limit=2"]);
    assert_eq!(json_keys(&json), ["s/a", "s/b"]);
    assert_eq!(json["count"], 3);
    assert_eq!(json["more"], true);
    let all = etcdctl_json(&ep, &["get", "s/", "--prefix", "--limit=3"]);
    assert_eq!(all["count"], 3);
    assert!(
        all["more"].is_null() || all["more"] == false,
        "nothing cut off: {all}"
    );
}

#[test]
fn get_sort_by_each_target_and_order() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "s/b", "2"); // rev 2
    put(&ep, "s/c", "1"); // rev 3
    put(&ep, "s/a", "3"); // rev 4
    put(&ep, "s/c", "0"); // rev 5: s/c version 2, newest mod, oldest value
    let sorted = |by: &str, order: &str| {
        json_keys(&etcdctl_json(
            &ep,
            &[
                "get",
                "s/",
                "--prefix",
                &format!("--sort-by={by}"),
                &format!("--order={order}"),
            ],
        ))
    };
    assert_eq!(sorted("KEY", "ASCEND"), ["s/a", "s/b", "s/c"]);
    assert_eq!(sorted("KEY", "DESCEND"), ["s/c", "s/b", "s/a"]);
    assert_eq!(sorted("CREATE", "ASCEND"), ["s/b", "s/c", "s/a"]);
    assert_eq!(sorted("CREATE", "DESCEND"), ["s/a", "s/c", "s/b"]);
    assert_eq!(sorted("MODIFY", "ASCEND"), ["s/b", "s/a", "s/c"]);
    assert_eq!(sorted("MODIFY", "DESCEND"), ["s/c", "s/a", "s/b"]);
    assert_eq!(sorted("VALUE", "ASCEND"), ["s/c", "s/b", "s/a"]);
    assert_eq!(sorted("VALUE", "DESCEND"), ["s/a", "s/b", "s/c"]);
    assert_eq!(sorted("VERSION", "DESCEND")[0], "s/c");
    assert_eq!(sorted("VERSION", "ASCEND")[2], "s/c");
    // Sorting happens before the limit: the newest key, not the first by name.
    let limited = etcdctl_json(
        &ep,
        &[
            "get",
            "s/",
            "--prefix",
            "--sort-by=MODIFY",
            "--order=DESCEND",
            "--limit=1",
        ],
    );
    assert_eq!(json_keys(&limited), ["s/c"]);
    assert_eq!(limited["more"], true);
}

#[test]
fn get_keys_only_omits_values() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "k/1", "secret-1");
    put(&ep, "k/2", "secret-2");
    let out = etcdctl_ok(&ep, &["get", "k/", "--prefix", "--keys-only"]);
    assert!(!out.contains("secret"), "values leaked: {out:?}");
    assert_eq!(
        lines(&out)
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>(),
        ["k/1", "k/2"]
    );
    let json = etcdctl_json(&ep, &["get", "k/", "--prefix", "--keys-only"]);
    assert_eq!(json_keys(&json), ["k/1", "k/2"]);
    for kv in json["kvs"].as_array().unwrap() {
        assert!(kv["value"].is_null(), "keys-only returned a value: {kv}");
        assert_eq!(kv["version"], 1, "metadata is still returned: {kv}");
    }
}

#[test]
fn json_output_tracks_header_create_mod_revision_and_version() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    assert_eq!(revision(&ep), 1, "an empty store is at revision 1");
    for (i, value) in ["a", "b", "c"].iter().enumerate() {
        let answer = etcdctl_json(&ep, &["put", "foo", value]);
        assert_eq!(
            answer["header"]["revision"],
            2 + i as i64,
            "each put is one new revision"
        );
    }
    put(&ep, "other", "x"); // rev 5
    let json = etcdctl_json(&ep, &["get", "foo"]);
    assert_eq!(json["header"]["revision"], 5);
    assert_eq!(json["count"], 1);
    let kv = &json["kvs"][0];
    assert_eq!(json_text(&kv["key"]), "foo");
    assert_eq!(json_text(&kv["value"]), "c");
    assert_eq!(
        (kv["create_revision"].as_i64(), kv["mod_revision"].as_i64()),
        (Some(2), Some(4))
    );
    assert_eq!(kv["version"], 3);
    let meta = etcdctl_json(&ep, &["get", "foo"]);
    assert_eq!(meta["header"]["member_id"], json["header"]["member_id"]);
    assert!(
        meta["header"]["cluster_id"].as_u64().unwrap_or(0) != 0,
        "cluster id set: {meta}"
    );
    assert!(
        meta["header"]["raft_term"].as_u64().unwrap_or(0) >= 1,
        "raft term set: {meta}"
    );
    assert_eq!(revision(&ep), 5, "reads do not bump the revision");
}

#[test]
fn del_prefix_with_prev_kv_prints_and_removes_exactly_the_prefix() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "p/1", "v1");
    put(&ep, "p/2", "v2");
    put(&ep, "p", "parent");
    put(&ep, "q", "other"); // rev 5
    let out = etcdctl_ok(&ep, &["del", "p/", "--prefix", "--prev-kv"]);
    assert_eq!(lines(&out), ["2", "p/1", "v1", "p/2", "v2"]);
    assert_eq!(revision(&ep), 6, "one delete of two keys is one revision");
    assert_eq!(etcdctl_ok(&ep, &["get", "p/", "--prefix"]), "");
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "p"])), ["p", "parent"]);
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "q"])), ["q", "other"]);
    // Deleting nothing is not a write.
    assert_eq!(etcdctl_ok(&ep, &["del", "p/", "--prefix"]).trim(), "0");
    assert_eq!(
        etcdctl_ok(&ep, &["del", "missing", "--prev-kv"]).trim(),
        "0"
    );
    assert_eq!(revision(&ep), 6);
    let json = etcdctl_json(&ep, &["del", "q", "--prev-kv"]);
    assert_eq!(json["deleted"], 1);
    assert_eq!(json["header"]["revision"], 7);
    assert_eq!(json["prev_kvs"][0]["mod_revision"], 5);
    assert_eq!(json_text(&json["prev_kvs"][0]["value"]), "other");
}

/// Runs a non-interactive `etcdctl txn` with `input` on stdin.
fn txn(ep: &str, input: &str, json: bool) -> String {
    let args: &[&str] = if json {
        &["txn", "-w", "json"]
    } else {
        &["txn"]
    };
    let run = etcdctl(ep, args, Some(input));
    assert!(run.ok, "txn failed: {}", run.stderr);
    run.stdout
}

#[test]
fn txn_piped_takes_success_branch_when_all_compares_hold() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "t", "a"); // rev 2
    put(&ep, "t", "b"); // rev 3, version 2
    let input = "value(\"t\") = \"b\"\nversion(\"t\") = \"2\"\ncreate(\"t\") = \"2\"\nmod(\"t\") = \"3\"\nversion(\"missing\") = \"0\"\n\nput r1 yes\nput r2 yes\nget t\n\nput r1 no\n\n";
    assert_eq!(
        lines(&txn(&ep, input, false)),
        ["SUCCESS", "", "OK", "", "OK", "", "t", "b"]
    );
    let r1 = etcdctl_json(&ep, &["get", "r1"]);
    let r2 = etcdctl_json(&ep, &["get", "r2"]);
    assert_eq!(json_text(&r1["kvs"][0]["value"]), "yes");
    assert_eq!(
        r1["kvs"][0]["mod_revision"], 4,
        "both puts of the txn share one revision"
    );
    assert_eq!(r2["kvs"][0]["mod_revision"], 4);
    assert_eq!(revision(&ep), 4);
}

#[test]
fn txn_piped_takes_failure_branch_when_any_compare_fails() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "t", "a"); // rev 2
    let failing = [
        "value(\"t\") = \"zz\"",
        "value(\"t\") != \"a\"",
        "version(\"t\") > \"1\"",
        "create(\"t\") < \"2\"",
        "mod(\"t\") != \"2\"",
        "value(\"missing\") = \"\"",
    ];
    for (i, compare) in failing.iter().enumerate() {
        let input =
            format!("value(\"t\") = \"a\"\n{compare}\n\nput t changed\n\nput f{i} ran\nget t\n\n");
        let answer = txn(&ep, &input, true);
        let json: serde_json::Value = serde_json::from_str(answer.trim()).expect("txn json");
        assert!(
            json["succeeded"].is_null() || json["succeeded"] == false,
            "{compare}: {json}"
        );
        assert_eq!(
            json["header"]["revision"],
            3 + i as i64,
            "{compare}: the failure put is one revision"
        );
        let got = &json["responses"][1]["Response"]["ResponseRange"]["kvs"][0];
        assert_eq!(
            json_text(&got["value"]),
            "a",
            "{compare}: success branch must not run"
        );
    }
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "t"])), ["t", "a"]);
    assert_eq!(
        json_keys(&etcdctl_json(&ep, &["get", "f", "--prefix"])).len(),
        failing.len()
    );
    let plain = txn(
        &ep,
        "mod(\"t\") = \"99\"\n\nput t changed\n\nget t\n\n",
        false,
    );
    assert_eq!(lines(&plain), ["FAILURE", "", "t", "a"]);
}

#[test]
fn txn_interactive_reads_the_same_script_from_stdin() {
    let store = TempStore::start(&[]);
    let ep = store.endpoint();
    put(&ep, "i", "1");
    let run = |script: &str| {
        let run = etcdctl(&ep, &["txn", "-i"], Some(script));
        assert!(run.ok, "txn -i failed: {}", run.stderr);
        run.stdout
    };
    let ok = run("value(\"i\") = \"1\"\n\nput i 2\n\nput i 3\n\n");
    assert!(
        ok.contains("compares:") && ok.contains("success requests"),
        "prompts: {ok:?}"
    );
    assert!(ok.contains("SUCCESS") && !ok.contains("FAILURE"), "{ok:?}");
    assert_eq!(lines(&etcdctl_ok(&ep, &["get", "i"])), ["i", "2"]);
    let failed = run("value(\"i\") = \"1\"\n\nput i 2\n\ndel i\n\n");
    assert!(
        failed.contains("FAILURE") && !failed.contains("SUCCESS"),
        "{failed:?}"
    );
    assert_eq!(
        etcdctl_ok(&ep, &["get", "i"]),
        "",
        "the failure branch deleted the key"
    );
}

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
