//! etcd's gRPC API spoken directly, for what etcdctl hides: a token kept
//! across requests (so that it can expire, or be taken to another
//! member), and a watch's cancellation.

use std::time::Duration;

use capstan_proto::etcdserverpb::auth_client::AuthClient;
use capstan_proto::etcdserverpb::kv_client::KvClient;
use capstan_proto::etcdserverpb::watch_client::WatchClient;
use capstan_proto::etcdserverpb::watch_request::RequestUnion;
use capstan_proto::etcdserverpb::{
    AuthenticateRequest, PutRequest, RangeRequest, WatchCreateRequest, WatchRequest, WatchResponse,
};
use futures::StreamExt;
use tonic::transport::Channel;
use tonic::{Request, Status};

pub fn block_on<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(work)
}

pub async fn channel(url: &str) -> Channel {
    Channel::from_shared(url.to_string())
        .expect("a URL")
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect to {url}: {err}"))
}

/// A request carrying `token` as etcd clients send it.
fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = token.parse().expect("a token is ASCII");
        request.metadata_mut().insert("token", value);
    }
    request
}

pub async fn authenticate(url: &str, name: &str, password: &str) -> Result<String, Status> {
    let request = AuthenticateRequest {
        name: name.into(),
        password: password.into(),
    };
    let response = AuthClient::new(channel(url).await)
        .authenticate(request)
        .await?;
    Ok(response.into_inner().token)
}

/// The value of `key`, read with `token`.
pub async fn get(url: &str, key: &str, token: Option<&str>) -> Result<Option<String>, Status> {
    let request = RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    };
    let response = KvClient::new(channel(url).await)
        .range(with_token(request, token))
        .await?
        .into_inner();
    let value = response.kvs.first().map(|kv| kv.value.clone());
    Ok(value.map(|v| String::from_utf8_lossy(&v).into_owned()))
}

pub async fn put(url: &str, key: &str, value: &str, token: Option<&str>) -> Result<(), Status> {
    let request = PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        ..Default::default()
    };
    KvClient::new(channel(url).await)
        .put(with_token(request, token))
        .await?;
    Ok(())
}

/// Opens a watch of the keys from `key` to `range_end` and returns the
/// server's first answer (created, or created and canceled).
pub async fn watch_created(
    url: &str,
    key: &str,
    range_end: &str,
    token: Option<&str>,
) -> WatchResponse {
    let create = WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: key.as_bytes().to_vec(),
            range_end: range_end.as_bytes().to_vec(),
            ..Default::default()
        })),
    };
    // The request stream stays open, as a client's does.
    let requests = futures::stream::iter([create]).chain(futures::stream::pending());
    let mut responses = WatchClient::new(channel(url).await)
        .watch(with_token(requests, token))
        .await
        .expect("a watch stream")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), responses.message()).await;
    first
        .expect("an answer to the create in time")
        .expect("a watch response")
        .expect("the stream stays open")
}
