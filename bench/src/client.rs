//! Connecting to a server under test and bounding each request.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

/// Opens `count` separate clients (each its own HTTP/2 connection) to
/// `endpoint`; `request_timeout` bounds each unary request (None for
/// clients that hold long watch streams).
pub(crate) async fn connect_clients(
    endpoint: &str,
    count: usize,
    request_timeout: Option<Duration>,
    connect_limit: Duration,
) -> Result<Vec<Client>, String> {
    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let mut options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(5));
        if let Some(timeout) = request_timeout {
            options = options.with_timeout(timeout);
        }
        let endpoints: Vec<&str> = endpoint.split(',').collect();
        clients.push(within(connect_limit, Client::connect(endpoints, Some(options))).await?);
    }
    Ok(clients)
}

/// Runs a request with a time limit, flattening both failures to text.
pub(crate) async fn within<T, E: std::fmt::Display>(
    limit: Duration,
    request: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("timed out after {limit:?}")),
    }
}

pub(crate) fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map_or(-1, |h| h.revision())
}
