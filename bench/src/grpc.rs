//! The timed workloads' client: etcd's KV calls as gRPC unary requests
//! written straight onto one HTTP/2 connection with the `h2` crate.
//!
//! The load generator shares two cores with the server it measures, so
//! every CPU second it spends is one the server cannot: the ratio between
//! two servers shrinks toward 1 as the generator's share grows. etcd-client
//! put a load-balancing channel and a buffer task in front of every request;
//! tonic's generated client on hyper still spawned a task per request to
//! pipe its body and ran tonic's streaming codec for one message. A unary
//! call needs neither: HEADERS and one DATA frame out, HEADERS, DATA and
//! trailers back. Both servers get the same client in the same run.

use std::future::Future;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use capstan_proto::etcdserverpb::{
    PutRequest, PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use h2::client::SendRequest;
use http::header::{CONTENT_TYPE, TE};
use http::{HeaderMap, Method, Uri};
use prost::Message;
use tonic::{Code, Status};

/// Receive windows like those of common gRPC clients, so a response never
/// waits for a WINDOW_UPDATE.
const WINDOW: u32 = 1 << 20;

/// etcd's KV service on one HTTP/2 connection; clones share the connection.
#[derive(Clone)]
pub(crate) struct Kv {
    sender: SendRequest<Bytes>,
    origin: Uri,
}

impl Kv {
    pub(crate) async fn put(&mut self, request: PutRequest) -> Result<PutResponse, Status> {
        self.unary("/etcdserverpb.KV/Put", &request).await
    }

    pub(crate) async fn range(&mut self, request: RangeRequest) -> Result<RangeResponse, Status> {
        self.unary("/etcdserverpb.KV/Range", &request).await
    }

    pub(crate) async fn txn(&mut self, request: TxnRequest) -> Result<TxnResponse, Status> {
        self.unary("/etcdserverpb.KV/Txn", &request).await
    }

    /// One gRPC unary call: the request as a single length-prefixed,
    /// uncompressed message; the answer's status from its headers (a
    /// trailers-only answer) or its trailers.
    async fn unary<R: Message + Default>(
        &mut self,
        path: &'static str,
        request: &impl Message,
    ) -> Result<R, Status> {
        let head = http::Request::builder()
            .method(Method::POST)
            .uri(self.uri(path)?)
            .header(CONTENT_TYPE, "application/grpc")
            .header(TE, "trailers")
            .body(())
            .map_err(|err| Status::internal(format!("request head: {err}")))?;
        let mut sender = self.sender.clone().ready().await.map_err(transport)?;
        let (response, mut body) = sender.send_request(head, false).map_err(transport)?;
        body.send_data(frame(request), true).map_err(transport)?;
        let (parts, mut body) = response.await.map_err(transport)?.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err(Status::unknown(format!("HTTP status {}", parts.status)));
        }
        if let Some(failed) = failure(&parts.headers) {
            return Err(failed);
        }
        let mut message = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(transport)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            message.extend_from_slice(&chunk);
        }
        match body.trailers().await.map_err(transport)? {
            Some(trailers) if trailers.contains_key("grpc-status") => {
                if let Some(failed) = failure(&trailers) {
                    return Err(failed);
                }
            }
            _ => return Err(Status::internal("the answer carries no grpc-status")),
        }
        unframe(&message)
    }

    fn uri(&self, path: &'static str) -> Result<Uri, Status> {
        let mut parts = self.origin.clone().into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(path));
        Uri::from_parts(parts).map_err(|err| Status::internal(format!("uri: {err}")))
    }
}

/// gRPC's message framing: no compression, the length, the message.
fn frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    message
        .encode(&mut out)
        .expect("the buffer was sized for the message");
    out.freeze()
}

fn unframe<R: Message + Default>(body: &[u8]) -> Result<R, Status> {
    let bad = |why: &str| Status::internal(format!("answer body: {why}"));
    if body.len() < 5 {
        return Err(bad("shorter than a message prefix"));
    }
    if body[0] != 0 {
        return Err(bad("compressed, but none was asked for"));
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let message = body
        .get(5..5 + len)
        .ok_or_else(|| bad("shorter than its length prefix"))?;
    R::decode(message).map_err(|err| bad(&err.to_string()))
}

/// The call's failure if `headers` carry a grpc-status other than OK.
fn failure(headers: &HeaderMap) -> Option<Status> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .parse::<i32>()
        .ok()?;
    if code == 0 {
        return None;
    }
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default();
    Some(Status::new(Code::from(code), message.to_string()))
}

fn transport(err: h2::Error) -> Status {
    Status::unavailable(format!("HTTP/2: {err}"))
}

/// Connects to the first of `endpoints` (comma-separated `http://host:port`)
/// with TCP_NODELAY, as gRPC clients do.
pub(crate) async fn connect(endpoints: &str, limit: Duration) -> Result<Kv, String> {
    let origin: Uri = endpoints
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
        h2::client::Builder::new()
            .initial_window_size(WINDOW)
            .initial_connection_window_size(WINDOW)
            .handshake::<_, Bytes>(stream)
            .await
            .map_err(|err| format!("HTTP/2 handshake with {authority}: {err}"))
    };
    let (sender, connection) = tokio::time::timeout(limit, handshake)
        .await
        .map_err(|_| format!("connect {authority}: timed out after {limit:?}"))??;
    // The connection's task reads and writes the socket; it ends when every
    // clone of the sender is dropped or the server hangs up.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Kv { sender, origin })
}

/// [`crate::client::within`] for a call here: the message, or the status
/// as text.
pub(crate) async fn within<T>(
    limit: Duration,
    request: impl Future<Output = Result<T, Status>>,
) -> Result<T, String> {
    let answer = async {
        request
            .await
            .map_err(|status| format!("{:?}: {}", status.code(), status.message()))
    };
    crate::client::within(limit, answer).await
}

/// The revision in a response header, or -1 when there is none.
pub(crate) fn revision(header: Option<&capstan_proto::etcdserverpb::ResponseHeader>) -> i64 {
    header.map_or(-1, |h| h.revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_message_comes_back_whole() {
        let request = PutRequest {
            key: b"k".to_vec(),
            value: vec![7; 300],
            ..Default::default()
        };
        let framed = frame(&request);
        assert_eq!(framed[0], 0);
        assert_eq!(framed.len(), 5 + request.encoded_len());
        assert_eq!(unframe::<PutRequest>(&framed).unwrap(), request);
        assert!(unframe::<PutRequest>(&framed[..framed.len() - 1]).is_err());
        assert!(unframe::<PutRequest>(&[1, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn a_status_other_than_ok_is_a_failure() {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-status", "0".parse().unwrap());
        assert!(failure(&headers).is_none());
        headers.insert("grpc-status", "9".parse().unwrap());
        headers.insert("grpc-message", "etcdserver: no leader".parse().unwrap());
        let failed = failure(&headers).unwrap();
        assert_eq!(failed.code(), Code::FailedPrecondition);
        assert_eq!(failed.message(), "etcdserver: no leader");
    }
}
