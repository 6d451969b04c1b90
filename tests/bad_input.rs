//! Bad requests get etcd's gRPC code and exact message, and change nothing:
//! the revision and every key are the same afterwards.

use capstan_tests::client::{assert_grpc_error, connect};
use capstan_tests::keyspace::{read_keyspace, Keyspace};
use capstan_tests::store::TempStore;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, LeaseGrantOptions, PutOptions, Txn,
    TxnOp,
};
use tonic::Code;

const EMPTY_KEY: &str = "etcdserver: key is not provided";
const DUPLICATE_KEY: &str = "etcdserver: duplicate key given in txn request";
const LEASE_NOT_FOUND: &str = "etcdserver: requested lease not found";
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
const FUTURE: &str = "etcdserver: mvcc: required revision is a future revision";
const TOO_LARGE: &str = "etcdserver: request is too large";
const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";

/// The 1.5 MiB default of `--max-request-bytes`.
const MAX_REQUEST_BYTES: usize = 1_572_864;

/// A store holding a few keys (one of them leased); returns the keyspace
/// every bad request must leave as it is.
async fn start() -> (TempStore, Client, Keyspace) {
    let store = TempStore::start(&[]);
    let mut client = connect(&store).await;
    let lease = client.lease_grant(600, None).await.unwrap().id();
    client.put("a", "1", None).await.unwrap();
    client
        .put("b", "2", Some(PutOptions::new().with_lease(lease)))
        .await
        .unwrap();
    client.put("c", "3", None).await.unwrap();
    client.put("a", "4", None).await.unwrap();
    let before = read_keyspace(&mut client).await;
    assert_eq!(before.revision, 5);
    (store, client, before)
}

async fn assert_unchanged(client: &mut Client, before: &Keyspace) {
    assert_eq!(
        &read_keyspace(client).await,
        before,
        "a refused request changed the store"
    );
}

fn put_op(key: &str) -> TxnOp {
    TxnOp::put(key, "v", None)
}

#[tokio::test]
async fn empty_key_is_refused_in_every_request() {
    let (_store, mut client, before) = start().await;
    let code = Code::InvalidArgument;
    assert_grpc_error(client.put("", "v", None).await, code, EMPTY_KEY);
    assert_grpc_error(client.get("", None).await, code, EMPTY_KEY);
    assert_grpc_error(client.delete("", None).await, code, EMPTY_KEY);
    let in_txn = Txn::new().and_then([put_op("ok"), put_op("")]);
    assert_grpc_error(client.txn(in_txn).await, code, EMPTY_KEY);
    let in_failure = Txn::new()
        .and_then([put_op("ok")])
        .or_else([TxnOp::delete("", None)]);
    assert_grpc_error(client.txn(in_failure).await, code, EMPTY_KEY);
    let in_compare = Txn::new()
        .when([Compare::version("", CompareOp::Equal, 0)])
        .and_then([put_op("ok")]);
    assert_grpc_error(client.txn(in_compare).await, code, EMPTY_KEY);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn range_end_before_key_is_an_empty_range_not_an_error() {
    let (_store, mut client, before) = start().await;
    let got = client
        .get("c", Some(GetOptions::new().with_range("a")))
        .await
        .unwrap();
    assert!(got.kvs().is_empty(), "{:?}", got.kvs());
    assert_eq!(got.count(), 0);
    let deleted = client
        .delete(
            "c",
            Some(DeleteOptions::new().with_range("a").with_prev_key()),
        )
        .await
        .unwrap();
    assert_eq!(deleted.deleted(), 0);
    assert!(deleted.prev_kvs().is_empty());
    assert_eq!(
        deleted.header().unwrap().revision(),
        before.revision,
        "deleting nothing is not a write"
    );
    let in_txn = Txn::new().and_then([TxnOp::delete(
        "c",
        Some(DeleteOptions::new().with_range("b")),
    )]);
    let response = client.txn(in_txn).await.unwrap();
    assert!(response.succeeded());
    assert_eq!(response.header().unwrap().revision(), before.revision);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn txn_writing_one_key_twice_is_a_duplicate() {
    let (_store, mut client, before) = start().await;
    let code = Code::InvalidArgument;
    let twice = Txn::new().and_then([put_op("k"), put_op("x"), put_op("k")]);
    assert_grpc_error(client.txn(twice).await, code, DUPLICATE_KEY);
    let in_failure = Txn::new()
        .when([Compare::value("a", CompareOp::Equal, "4")])
        .and_then([put_op("k")])
        .or_else([put_op("a"), put_op("a")]);
    assert_grpc_error(client.txn(in_failure).await, code, DUPLICATE_KEY);
    let put_then_delete = Txn::new().and_then([put_op("a"), TxnOp::delete("a", None)]);
    assert_grpc_error(client.txn(put_then_delete).await, code, DUPLICATE_KEY);
    let put_in_deleted_range = Txn::new().and_then([
        TxnOp::delete("a", Some(DeleteOptions::new().with_range("c"))),
        put_op("b"),
    ]);
    assert_grpc_error(client.txn(put_in_deleted_range).await, code, DUPLICATE_KEY);
    let nested = Txn::new().and_then([put_op("k")]);
    let outer_and_nested = Txn::new().and_then([put_op("k"), TxnOp::txn(nested)]);
    assert_grpc_error(client.txn(outer_and_nested).await, code, DUPLICATE_KEY);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn txn_branches_and_nested_branches_may_each_write_the_same_key() {
    let (_store, mut client, before) = start().await;
    // Only one branch runs, so these are not duplicates in etcd.
    let both_branches = Txn::new()
        .when([Compare::value("a", CompareOp::Equal, "4")])
        .and_then([put_op("k")])
        .or_else([put_op("k")]);
    assert!(client.txn(both_branches).await.unwrap().succeeded());
    let overlapping_deletes = Txn::new().and_then([
        TxnOp::delete("a", Some(DeleteOptions::new().with_range("c"))),
        TxnOp::delete("b", Some(DeleteOptions::new().with_range("d"))),
    ]);
    let response = client.txn(overlapping_deletes).await.unwrap();
    assert_eq!(response.header().unwrap().revision(), before.revision + 2);
    let nested = Txn::new()
        .when([Compare::version("n", CompareOp::Equal, 0)])
        .and_then([put_op("n")])
        .or_else([put_op("n")]);
    let response = client
        .txn(Txn::new().and_then([TxnOp::txn(nested)]))
        .await
        .unwrap();
    assert_eq!(response.header().unwrap().revision(), before.revision + 3);
}

#[tokio::test]
async fn nested_txn_may_put_a_key_in_one_branch_and_delete_it_in_the_other() {
    let (_store, mut client, before) = start().await;
    let nested = Txn::new()
        .when([Compare::version("n", CompareOp::Equal, 0)])
        .and_then([put_op("n")])
        .or_else([TxnOp::delete("n", None)]);
    let response = client
        .txn(Txn::new().and_then([TxnOp::txn(nested)]))
        .await
        .unwrap();
    assert_eq!(response.header().unwrap().revision(), before.revision + 1);
    assert_eq!(
        client.get("n", None).await.unwrap().kvs()[0].mod_revision(),
        before.revision + 1
    );
}

#[tokio::test]
async fn put_with_a_missing_lease_is_not_found() {
    let (_store, mut client, before) = start().await;
    let missing = PutOptions::new().with_lease(0x5eed);
    assert_grpc_error(
        client.put("a", "x", Some(missing.clone())).await,
        Code::NotFound,
        LEASE_NOT_FOUND,
    );
    assert_grpc_error(
        client.put("new", "x", Some(missing.clone())).await,
        Code::NotFound,
        LEASE_NOT_FOUND,
    );
    let in_txn = Txn::new().and_then([put_op("ok"), TxnOp::put("new", "x", Some(missing.clone()))]);
    assert_grpc_error(client.txn(in_txn).await, Code::NotFound, LEASE_NOT_FOUND);
    let nested = Txn::new().and_then([TxnOp::put("new", "x", Some(missing))]);
    let in_nested = Txn::new().and_then([put_op("ok"), TxnOp::txn(nested)]);
    assert_grpc_error(client.txn(in_nested).await, Code::NotFound, LEASE_NOT_FOUND);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn put_with_a_revoked_lease_is_not_found() {
    let (_store, mut client, _) = start().await;
    let lease = client.lease_grant(600, None).await.unwrap().id();
    client.lease_revoke(lease).await.unwrap();
    let before = read_keyspace(&mut client).await;
    let result = client
        .put("a", "x", Some(PutOptions::new().with_lease(lease)))
        .await;
    assert_grpc_error(result, Code::NotFound, LEASE_NOT_FOUND);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn reads_at_future_or_compacted_revisions_are_out_of_range() {
    let (_store, mut client, _) = start().await;
    client.compact(4, None).await.unwrap();
    let before = read_keyspace(&mut client).await;
    let at = |revision| Some(GetOptions::new().with_revision(revision));
    assert_grpc_error(client.get("a", at(6)).await, Code::OutOfRange, FUTURE);
    assert_grpc_error(
        client.get("a", at(i64::MAX)).await,
        Code::OutOfRange,
        FUTURE,
    );
    assert_grpc_error(client.get("a", at(3)).await, Code::OutOfRange, COMPACTED);
    assert_grpc_error(client.get("a", at(1)).await, Code::OutOfRange, COMPACTED);
    let in_txn = Txn::new().and_then([put_op("ok"), TxnOp::get("a", at(9))]);
    assert_grpc_error(client.txn(in_txn).await, Code::OutOfRange, FUTURE);
    assert_grpc_error(client.compact(4, None).await, Code::OutOfRange, COMPACTED);
    assert_grpc_error(client.compact(6, None).await, Code::OutOfRange, FUTURE);
    assert_eq!(
        client.get("a", at(4)).await.unwrap().kvs().len(),
        1,
        "the compaction revision is readable"
    );
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn hash_kv_at_future_or_compacted_revisions_is_out_of_range() {
    let (_store, mut client, _) = start().await;
    client.compact(4, None).await.unwrap();
    let before = read_keyspace(&mut client).await;
    assert_grpc_error(client.hash_kv(3).await, Code::OutOfRange, COMPACTED);
    assert_grpc_error(client.hash_kv(6).await, Code::OutOfRange, FUTURE);
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn request_over_one_and_a_half_mib_is_too_large() {
    let (_store, mut client, before) = start().await;
    let big = vec![b'x'; MAX_REQUEST_BYTES];
    assert_grpc_error(
        client.put("a", big.clone(), None).await,
        Code::InvalidArgument,
        TOO_LARGE,
    );
    let half = vec![b'y'; MAX_REQUEST_BYTES / 2 + 1];
    let in_txn = Txn::new().and_then([
        TxnOp::put("p", half.clone(), None),
        TxnOp::put("q", half, None),
    ]);
    assert_grpc_error(client.txn(in_txn).await, Code::InvalidArgument, TOO_LARGE);
    assert_unchanged(&mut client, &before).await;
    let fits = vec![b'z'; MAX_REQUEST_BYTES - 1024];
    let response = client
        .put("large", fits.clone(), None)
        .await
        .expect("a request under the limit");
    assert_eq!(response.header().unwrap().revision(), before.revision + 1);
    assert_eq!(
        client.get("large", None).await.unwrap().kvs()[0].value(),
        &fits[..]
    );
}

#[tokio::test]
async fn large_read_request_is_not_limited_like_a_write() {
    let (_store, mut client, before) = start().await;
    // etcd limits what it proposes through raft; a read is never proposed.
    let key = vec![b'k'; MAX_REQUEST_BYTES + 1];
    let response = client
        .get(key, None)
        .await
        .expect("etcd serves a large read");
    assert!(response.kvs().is_empty());
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn txn_with_more_than_128_ops_is_refused() {
    let (_store, mut client, before) = start().await;
    let ops = |n: usize| {
        (0..n)
            .map(|i| put_op(&format!("op/{i}")))
            .collect::<Vec<_>>()
    };
    let code = Code::InvalidArgument;
    assert_grpc_error(
        client.txn(Txn::new().and_then(ops(129))).await,
        code,
        TOO_MANY_OPS,
    );
    let failure = Txn::new()
        .when([Compare::value("a", CompareOp::Equal, "4")])
        .or_else(ops(129));
    assert_grpc_error(client.txn(failure).await, code, TOO_MANY_OPS);
    let compares: Vec<_> = (0..129)
        .map(|_| Compare::version("a", CompareOp::Greater, 0))
        .collect();
    assert_grpc_error(
        client.txn(Txn::new().when(compares).and_then(ops(1))).await,
        code,
        TOO_MANY_OPS,
    );
    assert_unchanged(&mut client, &before).await;
    let response = client
        .txn(Txn::new().and_then(ops(128)))
        .await
        .expect("128 ops are allowed");
    assert_eq!(response.header().unwrap().revision(), before.revision + 1);
    let written = client
        .get(
            "op/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .unwrap();
    assert_eq!(written.count(), 128);
}

#[tokio::test]
async fn revoking_or_renewing_a_missing_lease_is_not_found() {
    let (_store, mut client, before) = start().await;
    assert_grpc_error(
        client.lease_revoke(0x5eed).await,
        Code::NotFound,
        LEASE_NOT_FOUND,
    );
    let lease = client.lease_grant(600, None).await.unwrap().id();
    client.lease_revoke(lease).await.unwrap();
    assert_grpc_error(
        client.lease_revoke(lease).await,
        Code::NotFound,
        LEASE_NOT_FOUND,
    );
    // The server answers the keep-alive of a missing lease with TTL 0,
    // which the client reports as this error (not a transport failure).
    match client.lease_keep_alive(0x5eed).await {
        Err(etcd_client::Error::LeaseKeepAliveError(message)) => {
            assert_eq!(message, "lease not found")
        }
        Err(other) => panic!("keep-alive of a missing lease failed otherwise: {other}"),
        Ok(_) => panic!("keep-alive of a missing lease was accepted"),
    }
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn ignore_value_and_ignore_lease_misuse_is_refused() {
    let (_store, mut client, before) = start().await;
    let code = Code::InvalidArgument;
    let ignore_value = PutOptions::new().with_ignore_value();
    assert_grpc_error(
        client.put("missing", "", Some(ignore_value.clone())).await,
        code,
        "etcdserver: key not found",
    );
    assert_grpc_error(
        client.put("a", "x", Some(ignore_value)).await,
        code,
        "etcdserver: value is provided",
    );
    let ignore_lease = PutOptions::new().with_ignore_lease();
    assert_grpc_error(
        client.put("missing", "x", Some(ignore_lease)).await,
        code,
        "etcdserver: key not found",
    );
    let lease = client.leases().await.unwrap().leases()[0].id();
    let with_lease = PutOptions::new().with_ignore_lease().with_lease(lease);
    assert_grpc_error(
        client.put("a", "x", Some(with_lease)).await,
        code,
        "etcdserver: lease is provided",
    );
    assert_unchanged(&mut client, &before).await;
}

#[tokio::test]
async fn lease_grant_errors_use_etcd_codes() {
    let (_store, mut client, before) = start().await;
    let huge = client.lease_grant(9_000_000_001, None).await;
    assert_grpc_error(huge, Code::OutOfRange, "etcdserver: too large lease TTL");
    let id = client.leases().await.unwrap().leases()[0].id();
    let taken = client
        .lease_grant(60, Some(LeaseGrantOptions::new().with_id(id)))
        .await;
    assert_grpc_error(
        taken,
        Code::FailedPrecondition,
        "etcdserver: lease already exists",
    );
    assert_eq!(client.leases().await.unwrap().leases().len(), 1);
    assert_unchanged(&mut client, &before).await;
}
