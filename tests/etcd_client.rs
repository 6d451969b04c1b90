//! The `etcd-client` crate against a real `capstan-store` process: range
//! options, txns, puts and deletes (watches: `etcd_client_watch`; leases
//! and maintenance: `etcd_client_lease`).

use capstan_tests::client::{
    current_revision, fill_range_fixture, keys, put, start_store as start,
};
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse,
};

#[tokio::test]
async fn range_count_only_returns_the_count_and_no_kvs() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .get(
            "r/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(response.count(), 4);
    assert!(response.kvs().is_empty(), "{:?}", response.kvs());
    assert!(!response.more());
    let none = client
        .get(
            "x/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(none.count(), 0);
}

#[tokio::test]
async fn range_keys_only_keeps_metadata_and_drops_values() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .get("r/", Some(GetOptions::new().with_prefix().with_keys_only()))
        .await
        .unwrap();
    assert_eq!(response.kvs().len(), 4);
    let a = &response.kvs()[0];
    assert_eq!((a.key(), a.value()), (&b"r/a"[..], &b""[..]));
    assert_eq!(
        (a.create_revision(), a.mod_revision(), a.version()),
        (2, 5, 2)
    );
}

#[tokio::test]
async fn range_limit_sets_more_and_sort_applies_before_the_limit() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let limited = client
        .get("r/", Some(GetOptions::new().with_prefix().with_limit(2)))
        .await
        .unwrap();
    let names: Vec<_> = limited
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap())
        .collect();
    assert_eq!(names, ["r/a", "r/b"]);
    assert!(limited.more());
    assert_eq!(limited.count(), 4);
    let exact = client
        .get("r/", Some(GetOptions::new().with_prefix().with_limit(4)))
        .await
        .unwrap();
    assert!(!exact.more(), "a limit equal to the count cuts nothing off");
    let sorted = |target, order| GetOptions::new().with_prefix().with_sort(target, order);
    let newest = sorted(SortTarget::Mod, SortOrder::Descend).with_limit(2);
    assert_eq!(keys(&mut client, "r/", newest).await, ["r/d", "r/a"]);
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Create, SortOrder::Ascend)
        )
        .await,
        ["r/a", "r/b", "r/c", "r/d"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Value, SortOrder::Descend)
        )
        .await,
        ["r/d", "r/a", "r/c", "r/b"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Key, SortOrder::Descend)
        )
        .await,
        ["r/d", "r/c", "r/b", "r/a"]
    );
    assert_eq!(
        keys(
            &mut client,
            "r/",
            sorted(SortTarget::Version, SortOrder::Descend)
        )
        .await[0],
        "r/a"
    );
}

#[tokio::test]
async fn range_min_max_mod_and_create_revision_filters() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let prefix = || GetOptions::new().with_prefix();
    assert_eq!(
        keys(&mut client, "r/", prefix().with_min_mod_revision(4)).await,
        ["r/a", "r/c", "r/d"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_max_mod_revision(4)).await,
        ["r/b", "r/c"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_min_create_revision(4)).await,
        ["r/c", "r/d"]
    );
    assert_eq!(
        keys(&mut client, "r/", prefix().with_max_create_revision(3)).await,
        ["r/a", "r/b"]
    );
    let window = prefix().with_min_mod_revision(4).with_max_mod_revision(5);
    assert_eq!(keys(&mut client, "r/", window).await, ["r/a", "r/c"]);
    // At an old revision the filters see that revision's metadata.
    let old = prefix().with_revision(4).with_max_mod_revision(3);
    assert_eq!(keys(&mut client, "r/", old).await, ["r/a", "r/b"]);
}

#[tokio::test]
async fn range_from_key_explicit_end_and_serializable() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    assert_eq!(
        keys(&mut client, "r/c", GetOptions::new().with_from_key()).await,
        ["r/c", "r/d", "s"]
    );
    assert_eq!(
        keys(&mut client, "r/b", GetOptions::new().with_range("r/d")).await,
        ["r/b", "r/c"]
    );
    let all = GetOptions::new().with_all_keys().with_serializable();
    assert_eq!(
        keys(&mut client, "", all).await,
        ["r/a", "r/b", "r/c", "r/d", "s"]
    );
    let response = client
        .get("r/a", Some(GetOptions::new().with_revision(3)))
        .await
        .unwrap();
    assert_eq!(response.kvs()[0].value(), b"1");
    assert_eq!(
        response.header().unwrap().revision(),
        7,
        "the header has the current revision"
    );
}

#[tokio::test]
async fn txn_compares_every_target_and_runs_nested_ops_in_one_revision() {
    let (_store, mut client) = start().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    client
        .put("x", "1", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap(); // rev 2
    put(&mut client, "y", "a").await; // rev 3
    put(&mut client, "y", "b").await; // rev 4
    let nested = Txn::new()
        .when([Compare::value("y", CompareOp::Equal, "b")])
        .and_then([TxnOp::put("n1", "ran", None)])
        .or_else([TxnOp::put("n2", "wrong", None)]);
    let txn = Txn::new()
        .when([
            Compare::value("x", CompareOp::Equal, "1"),
            Compare::value("y", CompareOp::NotEqual, "a"),
            Compare::version("y", CompareOp::Equal, 2),
            Compare::version("y", CompareOp::Greater, 1),
            Compare::create_revision("y", CompareOp::Equal, 3),
            Compare::create_revision("x", CompareOp::Less, 3),
            Compare::mod_revision("y", CompareOp::Equal, 4),
            Compare::mod_revision("missing", CompareOp::Equal, 0),
            Compare::lease("x", CompareOp::Equal, lease),
            Compare::lease("y", CompareOp::Equal, 0),
        ])
        .and_then([
            TxnOp::put("z", "1", None),
            TxnOp::get("z", None),
            TxnOp::delete("x", None),
            TxnOp::txn(nested),
        ])
        .or_else([TxnOp::put("failed", "1", None)]);
    let response = client.txn(txn).await.unwrap();
    assert!(response.succeeded());
    assert_eq!(
        response.header().unwrap().revision(),
        5,
        "the whole txn is one revision"
    );
    let ops = response.op_responses();
    assert_eq!(ops.len(), 4);
    let TxnOpResponse::Get(get) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    assert_eq!(
        get.kvs()[0].mod_revision(),
        5,
        "a read in a txn sees the txn's earlier put"
    );
    let TxnOpResponse::Delete(deleted) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    assert_eq!(deleted.deleted(), 1);
    let TxnOpResponse::Txn(inner) = &ops[3] else {
        panic!("{:?}", ops[3])
    };
    assert!(inner.succeeded());
    for key in ["z", "n1"] {
        let got = client.get(key, None).await.unwrap();
        assert_eq!(got.kvs()[0].mod_revision(), 5, "{key}");
    }
    for key in ["x", "n2", "failed"] {
        assert!(
            client.get(key, None).await.unwrap().kvs().is_empty(),
            "{key} must not exist"
        );
    }
    assert_eq!(current_revision(&mut client).await, 5);
}

#[tokio::test]
async fn txn_failure_branch_runs_when_one_compare_fails() {
    let (_store, mut client) = start().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    put(&mut client, "y", "a").await; // rev 2
    put(&mut client, "z", "1").await; // rev 3
    let nested = Txn::new()
        .when([Compare::value("z", CompareOp::Equal, "1")])
        .and_then([TxnOp::delete("z", None)])
        .or_else([TxnOp::put("w", "wrong", None)]);
    let txn = Txn::new()
        .when([
            Compare::value("y", CompareOp::Equal, "a"),
            Compare::lease("y", CompareOp::Equal, lease),
        ])
        .and_then([TxnOp::put("y", "changed", None)])
        .or_else([
            TxnOp::put("f", "1", None),
            TxnOp::txn(nested),
            TxnOp::get("y", None),
        ]);
    let response = client.txn(txn).await.unwrap();
    assert!(!response.succeeded());
    assert_eq!(response.header().unwrap().revision(), 4);
    let ops = response.op_responses();
    let TxnOpResponse::Txn(inner) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    assert!(inner.succeeded());
    let TxnOpResponse::Get(get) = &ops[2] else {
        panic!("{:?}", ops[2])
    };
    assert_eq!(get.kvs()[0].value(), b"a");
    let f = client.get("f", None).await.unwrap();
    assert_eq!(f.kvs()[0].mod_revision(), 4);
    assert!(
        client.get("z", None).await.unwrap().kvs().is_empty(),
        "nested delete ran"
    );
    assert!(client.get("w", None).await.unwrap().kvs().is_empty());
    let z_before = client
        .get("z", Some(GetOptions::new().with_revision(3)))
        .await
        .unwrap();
    assert_eq!(z_before.kvs()[0].value(), b"1");
    // A value compare on a missing key is false; other targets see zero.
    let missing = Txn::new().when([Compare::value("nope", CompareOp::Equal, "")]);
    assert!(!client.txn(missing).await.unwrap().succeeded());
    let zero = Txn::new().when([
        Compare::version("nope", CompareOp::Equal, 0),
        Compare::create_revision("nope", CompareOp::Equal, 0),
    ]);
    assert!(client.txn(zero).await.unwrap().succeeded());
    assert_eq!(
        current_revision(&mut client).await,
        4,
        "read-only txns are not writes"
    );
}

#[tokio::test]
async fn txn_compare_with_a_range_must_hold_for_every_key() {
    let (_store, mut client) = start().await;
    put(&mut client, "p/1", "v").await;
    put(&mut client, "p/2", "v").await;
    put(&mut client, "p/2", "v").await;
    let all_exist = Compare::version("p/", CompareOp::Greater, 0).with_prefix();
    assert!(client
        .txn(Txn::new().when([all_exist]))
        .await
        .unwrap()
        .succeeded());
    let all_first = Compare::version("p/", CompareOp::Equal, 1).with_prefix();
    assert!(!client
        .txn(Txn::new().when([all_first]))
        .await
        .unwrap()
        .succeeded());
    let ranged = Compare::version("p/1", CompareOp::Equal, 1).with_range("p/2");
    assert!(client
        .txn(Txn::new().when([ranged]))
        .await
        .unwrap()
        .succeeded());
}

#[tokio::test]
async fn put_prev_kv_ignore_value_and_ignore_lease() {
    let (_store, mut client) = start().await;
    let first = client
        .put("k", "v1", Some(PutOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert!(first.prev_key().is_none(), "a create has no previous kv");
    let lease = client.lease_grant(60, None).await.unwrap().id();
    let second = client
        .put(
            "k",
            "v2",
            Some(PutOptions::new().with_prev_key().with_lease(lease)),
        )
        .await
        .unwrap();
    let prev = second.prev_key().expect("prev kv");
    assert_eq!(
        (
            prev.value(),
            prev.mod_revision(),
            prev.version(),
            prev.lease()
        ),
        (&b"v1"[..], 2, 1, 0)
    );
    let kept_value = client
        .put(
            "k",
            "",
            Some(PutOptions::new().with_ignore_value().with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(
        kept_value.header().unwrap().revision(),
        4,
        "ignore_value is still a write"
    );
    assert_eq!(kept_value.prev_key().unwrap().value(), b"v2");
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    // The value is kept; the lease comes from the request (none) as in etcd.
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v2"[..], 3, 4, 0)
    );
    client
        .put("k", "v3", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap(); // rev 5
    client
        .put("k", "v4", Some(PutOptions::new().with_ignore_lease()))
        .await
        .unwrap(); // rev 6
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v4"[..], 5, 6, lease)
    );
    let both = PutOptions::new().with_ignore_value().with_ignore_lease();
    client.put("k", "", Some(both)).await.unwrap(); // rev 7
    let kv = client.get("k", None).await.unwrap().kvs()[0].clone();
    assert_eq!(
        (kv.value(), kv.version(), kv.mod_revision(), kv.lease()),
        (&b"v4"[..], 6, 7, lease)
    );
    client.put("k", "v5", None).await.unwrap();
    assert_eq!(
        client.get("k", None).await.unwrap().kvs()[0].lease(),
        0,
        "a plain put detaches the lease"
    );
}

#[tokio::test]
async fn delete_range_prev_kv_returns_the_deleted_pairs() {
    let (_store, mut client) = start().await;
    fill_range_fixture(&mut client).await;
    let response = client
        .delete(
            "r/b",
            Some(DeleteOptions::new().with_range("r/d").with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(response.deleted(), 2);
    assert_eq!(response.header().unwrap().revision(), 8);
    let prev: Vec<_> = response
        .prev_kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap(),
                kv.value_str().unwrap(),
                kv.mod_revision(),
            )
        })
        .collect();
    assert_eq!(prev, [("r/b", "2", 3), ("r/c", "3", 4)]);
    assert_eq!(
        keys(&mut client, "r/", GetOptions::new().with_prefix()).await,
        ["r/a", "r/d"]
    );
    let plain = client.delete("r/a", None).await.unwrap();
    assert_eq!(plain.deleted(), 1);
    assert!(plain.prev_kvs().is_empty(), "no prev kvs unless asked");
    let nothing = client
        .delete("r/zz", Some(DeleteOptions::new().with_prev_key()))
        .await
        .unwrap();
    assert_eq!(
        (nothing.deleted(), nothing.header().unwrap().revision()),
        (0, 9)
    );
}
