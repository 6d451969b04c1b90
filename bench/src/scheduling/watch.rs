//! A pods watch over one kept-alive connection, read as it streams: when
//! each pod of the namespace was first seen bound to a node (the binding
//! written and come back through the API server's watch, as a user sees it).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use hyper::header::{ACCEPT, HOST};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The watch, started; `bound` resolves with when the pods were bound.
pub struct BindWatch {
    pub bound: oneshot::Receiver<Result<BindTimes, String>>,
}

/// The instants at which the first and the last of the pods were bound.
#[derive(Debug, Clone, Copy)]
pub struct BindTimes {
    pub first: Instant,
    pub last: Instant,
}

/// Watches the pods of `namespace` on the plain port until `count` of
/// them are bound, or `timeout` passes. Returns once the watch is open.
pub async fn start(
    port: u16,
    namespace: &str,
    count: usize,
    timeout: Duration,
) -> Result<BindWatch, String> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect the watch: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("watch handshake: {e}"))?;
    tokio::spawn(connection);
    let request = hyper::Request::get(format!(
        "/api/v1/namespaces/{namespace}/pods?watch=true&allowWatchBookmarks=false"
    ))
    .header(HOST, format!("127.0.0.1:{port}"))
    .header(ACCEPT, "application/json")
    .body(Empty::<Bytes>::new())
    .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("open the watch: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the watch answered {}", response.status()));
    }
    let (done, bound) = oneshot::channel();
    let body = response.into_body();
    tokio::spawn(async move {
        let counted = tokio::time::timeout(timeout, count_bound(body, count)).await;
        let result = match counted {
            Ok(result) => result,
            Err(_) => Err(format!("not all {count} pods bound within {timeout:?}")),
        };
        let _ = done.send(result);
        drop(sender);
    });
    Ok(BindWatch { bound })
}

async fn count_bound(mut body: hyper::body::Incoming, count: usize) -> Result<BindTimes, String> {
    let mut buffer = BytesMut::new();
    let mut bound: HashSet<String> = HashSet::with_capacity(count);
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the watch broke: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            let Some(name) = bound_pod(&line)? else {
                continue;
            };
            first.get_or_insert_with(Instant::now);
            bound.insert(name);
            if bound.len() >= count {
                let first = first.unwrap_or_else(Instant::now);
                return Ok(BindTimes {
                    first,
                    last: Instant::now(),
                });
            }
        }
        if buffer.remaining() > 64 << 20 {
            return Err("a watch event larger than 64 MiB".into());
        }
    }
    Err(format!(
        "the watch ended after {} of {count} pods bound",
        bound.len()
    ))
}

/// The pod's name if this event shows it bound to a node.
fn bound_pod(line: &[u8]) -> Result<Option<String>, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let event: Value =
        serde_json::from_slice(line).map_err(|e| format!("a watch event that is not JSON: {e}"))?;
    if event["type"] == "ERROR" {
        return Err(format!("the watch sent an error: {}", event["object"]));
    }
    let pod = &event["object"];
    let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
    Ok((!node.is_empty()).then(|| pod["metadata"]["name"].as_str().unwrap_or("").to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_with_a_node_count() {
        let unbound = br#"{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{}}}"#;
        let bound =
            br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"},"spec":{"nodeName":"n"}}}"#;
        assert_eq!(bound_pod(unbound).unwrap(), None);
        assert_eq!(bound_pod(bound).unwrap().as_deref(), Some("a"));
        assert!(bound_pod(br#"{"type":"ERROR","object":{}}"#).is_err());
    }
}
