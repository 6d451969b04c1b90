//! The timed workloads' client: etcd's generated KV client (from the same
//! protos the store serves) sent straight down one HTTP/2 connection.
//!
//! etcd-client puts a load-balancing channel and a buffer task in front of
//! every request. On this machine the load generator shares two cores with
//! the server it measures, so every CPU second it spends is one the server
//! cannot: a cheaper client measures both servers closer to their own
//! cost. Both servers get the same client in the same run.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use capstan_proto::etcdserverpb::kv_client::KvClient;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// A KV client on one HTTP/2 connection; clones share the connection.
pub(crate) type Kv = KvClient<Connection>;

/// One HTTP/2 connection, as a tower service tonic's clients can use.
#[derive(Clone)]
pub(crate) struct Connection {
    sender: SendRequest<tonic::body::Body>,
}

type ResponseFuture = Pin<
    Box<dyn Future<Output = Result<http::Response<hyper::body::Incoming>, hyper::Error>> + Send>,
>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Connection {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.sender.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.sender.send_request(request))
    }
}

/// Connects to the first of `endpoints` (comma-separated `http://host:port`)
/// with TCP_NODELAY, as gRPC clients do.
pub(crate) async fn connect(endpoints: &str, limit: Duration) -> Result<Kv, String> {
    let origin: http::Uri = endpoints
        .split(',')
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|err| format!("endpoint {endpoints:?}: {err}"))?;
    let authority = origin
        .authority()
        .ok_or_else(|| format!("endpoint {endpoints:?} has no host:port"))?
        .to_string();
    let handshake = async {
        let stream = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|err| format!("connect {authority}: {err}"))?;
        stream
            .set_nodelay(true)
            .map_err(|err| format!("TCP_NODELAY: {err}"))?;
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .map_err(|err| format!("HTTP/2 handshake with {authority}: {err}"))
    };
    let (sender, connection) = tokio::time::timeout(limit, handshake)
        .await
        .map_err(|_| format!("connect {authority}: timed out after {limit:?}"))??;
    // The connection's task reads and writes the socket; it ends when every
    // clone of the sender is dropped or the server hangs up.
    tokio::spawn(connection);
    Ok(KvClient::with_origin(Connection { sender }, origin))
}

/// [`crate::client::within`] for a tonic call: the message, or the status
/// as text.
pub(crate) async fn within<T>(
    limit: Duration,
    request: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    let answer = async {
        request
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| format!("{:?}: {}", status.code(), status.message()))
    };
    crate::client::within(limit, answer).await
}

/// The revision in a response header, or -1 when there is none.
pub(crate) fn revision(header: Option<&capstan_proto::etcdserverpb::ResponseHeader>) -> i64 {
    header.map_or(-1, |h| h.revision)
}
