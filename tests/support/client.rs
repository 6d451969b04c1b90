//! Connecting the `etcd-client` crate to a store and checking its errors.

use std::fmt::Debug;

use etcd_client::{Client, ConnectOptions, Error};
use tonic::Code;

use crate::store::StoreProcess;

/// A client of `store` with a request timeout, so a hung store fails a
/// test instead of stalling it.
pub async fn connect(store: &StoreProcess) -> Client {
    let options = ConnectOptions::new()
        .with_connect_timeout(std::time::Duration::from_secs(5))
        .with_timeout(std::time::Duration::from_secs(10));
    Client::connect([store.url()], Some(options))
        .await
        .expect("connect to the store")
}

/// The gRPC status inside a client error, if the server sent one.
pub fn grpc_status(err: &Error) -> Option<(Code, &str)> {
    match err {
        Error::GRpcStatus(status) => Some((status.code(), status.message())),
        _ => None,
    }
}

/// Asserts `result` failed with exactly this gRPC code and message.
#[track_caller]
pub fn assert_grpc_error<T: Debug>(result: Result<T, Error>, code: Code, message: &str) {
    match result {
        Ok(value) => panic!("expected {code:?} {message:?}, got success: {value:?}"),
        Err(err) => assert_eq!(
            grpc_status(&err),
            Some((code, message)),
            "expected {code:?} {message:?}, got {err}"
        ),
    }
}

/// The store's current revision, from the header of a read.
pub async fn current_revision(client: &mut Client) -> i64 {
    let response = client
        .get("capstan-tests/probe", None)
        .await
        .expect("read the revision");
    response.header().expect("response header").revision()
}

/// A fresh store under test and a client of it.
pub async fn start_store() -> (crate::store::TempStore, Client) {
    let store = crate::store::TempStore::start(&[]);
    let client = connect(&store).await;
    (store, client)
}

/// Puts `key = value`; returns the revision of the put.
pub async fn put(client: &mut Client, key: &str, value: &str) -> i64 {
    let response = client.put(key, value, None).await.expect("put");
    response.header().expect("header").revision()
}

/// The keys a get with `options` returns.
pub async fn keys(client: &mut Client, key: &str, options: etcd_client::GetOptions) -> Vec<String> {
    let response = client.get(key, Some(options)).await.expect("get");
    response
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap().to_string())
        .collect()
}

/// r/a: create 2, mod 5, version 2; r/b: 3/3; r/c: 4/4; r/d: 6/6.
pub async fn fill_range_fixture(client: &mut Client) {
    for (key, value) in [
        ("r/a", "1"),
        ("r/b", "2"),
        ("r/c", "3"),
        ("r/a", "4"),
        ("r/d", "5"),
    ] {
        put(client, key, value).await;
    }
    put(client, "s", "outside").await; // rev 7
}
