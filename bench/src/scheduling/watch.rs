//! A pods watch over one kept-alive connection, read as it streams: when
//! each pod of the namespace was first seen bound to a node (the binding
//! written and come back through the API server's watch, as a user sees it).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::watch_stream::{self, EventLines};

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
    let path = format!("/api/v1/namespaces/{namespace}/pods?watch=true&allowWatchBookmarks=false");
    let body = watch_stream::open(port, &path).await?;
    let (done, bound) = oneshot::channel();
    tokio::spawn(async move {
        let counted = tokio::time::timeout(timeout, count_bound(body, count)).await;
        let result = match counted {
            Ok(result) => result,
            Err(_) => Err(format!("not all {count} pods bound within {timeout:?}")),
        };
        let _ = done.send(result);
    });
    Ok(BindWatch { bound })
}

async fn count_bound(mut body: hyper::body::Incoming, count: usize) -> Result<BindTimes, String> {
    let mut lines = EventLines::default();
    let mut bound: HashSet<String> = HashSet::with_capacity(count);
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the watch broke: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for line in lines.push(&data)? {
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
