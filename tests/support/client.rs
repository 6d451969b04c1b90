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
