//! The HTTP client of one workload client: hyper's HTTP/1.1 client on one
//! kept-alive loopback connection to the API server, reopened only if the
//! server closes it. One connection per client (not a shared pool, which
//! opens extra connections when a request races a connection's return to
//! it) makes N clients exactly N connections, like N kubectl-style
//! clients, and keeps connection setup out of the measured latencies.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::error::{ApiError, TransportError};

pub struct Connection {
    port: u16,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// A user every request acts as (`Impersonate-User`), so that priority
    /// and fairness and RBAC judge that user, not the port's own identity.
    impersonate: Option<&'static str>,
}

/// A status and the whole body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Connection {
    /// A client of the API server on 127.0.0.1:`port`; connects on first use.
    pub fn new(port: u16, timeout: Duration) -> Connection {
        Connection {
            port,
            timeout,
            sender: None,
            impersonate: None,
        }
    }

    /// A client whose requests act as `user` (in `system:authenticated`),
    /// which the connection's own identity must be allowed to impersonate.
    pub fn impersonating(port: u16, timeout: Duration, user: &'static str) -> Connection {
        Connection {
            impersonate: Some(user),
            ..Connection::new(port, timeout)
        }
    }

    pub async fn get(&mut self, path: &str) -> Result<Answer, ApiError> {
        self.send(Method::GET, path, Bytes::new()).await
    }

    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<Answer, ApiError> {
        self.send(Method::POST, path, body).await
    }

    pub async fn delete(&mut self, path: &str) -> Result<Answer, ApiError> {
        self.send(Method::DELETE, path, Bytes::new()).await
    }

    /// One request, its whole answer read (the latency a client sees
    /// includes the body), or why there was none. After a failure the
    /// connection is dropped, and the next request opens a new one.
    async fn send(&mut self, method: Method, path: &str, body: Bytes) -> Result<Answer, ApiError> {
        let timeout = self.timeout;
        let exchange = self.exchange(method.clone(), path, body);
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::Timeout(timeout)),
        };
        result.map_err(|source| {
            self.sender = None;
            ApiError::Transport {
                method,
                path: path.to_string(),
                source,
            }
        })
    }

    async fn exchange(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<Answer, TransportError> {
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, format!("127.0.0.1:{}", self.port))
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/json");
        let request = match super::rbac::enabled() {
            true => request.header(
                "authorization",
                format!("Bearer {}", super::rbac::CLIENT_TOKEN),
            ),
            false => request,
        };
        let request = match self.impersonate {
            Some(user) => request.header("impersonate-user", user),
            None => request,
        };
        let request = request.body(Full::new(body))?;
        let sender = self.ready_sender().await?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer { status, body })
    }

    /// The open connection, ready for a request, or a new one.
    async fn ready_sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, TransportError> {
        let reusable = match &mut self.sender {
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            self.sender = Some(connect(self.port).await?);
        }
        Ok(self.sender.as_mut().expect("set just above"))
    }
}

async fn connect(port: u16) -> Result<SendRequest<Full<Bytes>>, TransportError> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(TransportError::Connect)?;
    // Small requests and answers: Nagle would add 40 ms stalls.
    stream.set_nodelay(true).map_err(TransportError::Connect)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    // Drives the connection; ends when the sender is dropped or the
    // server closes it, so it outlives no run.
    tokio::spawn(connection);
    Ok(sender)
}
