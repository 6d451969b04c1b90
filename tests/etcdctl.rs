//! etcdctl 3.4 against a real `capstan-store` process: put, get with its
//! options, del and txn (watches, compaction, leases and the cluster's
//! status: `etcdctl_watch_lease`).

use capstan_tests::etcdctl::{
    etcdctl, etcdctl_json, etcdctl_ok, json_keys, json_text, lines, put, revision,
};
use capstan_tests::store::{StoreProcess, TempStore};

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
