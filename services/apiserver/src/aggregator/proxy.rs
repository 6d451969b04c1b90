//! One proxied request: sent over HTTPS (HTTP/1.1, rustls, the
//! front-proxy client certificate) to the backend an APIService
//! resolves to, on a kept-alive connection when one is idle (the
//! webhooks' pool). The answer comes back as it arrives, so a watch
//! streams; its connection goes back to the pool only once its body has
//! been read to the end.

use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::resolve::Backend;
use super::tls::{Configs, Trust};
use crate::admission::webhook::pool::{Place, Pool, Sender};

/// Why a backend gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("dial tcp {address}: {source}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    #[error("tls: {0}")]
    Tls(String),
    #[error("{0}")]
    Http(String),
}

/// What goes to the backend.
pub struct Outgoing {
    pub method: String,
    /// Path and query, as the client sent them.
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Bytes,
}

/// Sends proxied requests, keeping connections open between them.
pub struct Proxy {
    configs: Configs,
    pool: Arc<Pool>,
}

/// The backend's answer: its status, headers, and the body as it comes.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, ProxyError>> + Send>>,
}

impl Proxy {
    pub fn new(configs: Configs) -> Proxy {
        Proxy {
            configs,
            pool: Arc::new(Pool::default()),
        }
    }

    pub async fn send(
        &self,
        backend: &Backend,
        trust: &Trust,
        outgoing: Outgoing,
    ) -> Result<Answer, ProxyError> {
        let place = Place {
            address: backend.address.clone(),
            server_name: backend.server_name.clone(),
            ca_bundle: trust_key(trust),
        };
        let mut request = build(backend, outgoing)?;
        if let Some(mut sender) = self.pool.take(&place) {
            if sender.ready().await.is_ok() {
                match sender.try_send_request(request).await {
                    Ok(response) => return Ok(self.answer(place, sender, response)),
                    // Closed before the request went out: it goes on a
                    // new connection. Sent and then lost is an error.
                    Err(mut failed) => match failed.take_message() {
                        Some(unsent) => request = unsent,
                        None => return Err(ProxyError::Http(failed.into_error().to_string())),
                    },
                }
            }
        }
        let mut sender = self.connect(backend, trust).await?;
        let response = sender.send_request(request).await.map_err(http)?;
        Ok(self.answer(place, sender, response))
    }

    /// A TLS connection to `backend`, its certificate checked as `trust`
    /// says, this server's client certificate presented (a websocket to a
    /// kubelet goes over one too).
    pub async fn dial(
        &self,
        backend: &Backend,
        trust: &Trust,
    ) -> Result<TlsStream<TcpStream>, ProxyError> {
        let config = self.configs.get(trust).map_err(ProxyError::Tls)?;
        let tcp = TcpStream::connect(&backend.address)
            .await
            .map_err(|source| ProxyError::Connect {
                address: backend.address.clone(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(backend.server_name.clone())
            .map_err(|e| ProxyError::Tls(e.to_string()))?;
        TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| ProxyError::Tls(e.to_string()))
    }

    async fn connect(&self, backend: &Backend, trust: &Trust) -> Result<Sender, ProxyError> {
        let stream = self.dial(backend, trust).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// The answer, its body streamed; the connection is given back to
    /// the pool when the body ends.
    fn answer(&self, place: Place, sender: Sender, response: hyper::Response<Incoming>) -> Answer {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
            .collect();
        let pool = self.pool.clone();
        let body = response.into_body();
        let state = (body, Some((place, sender, pool)));
        let body = futures::stream::unfold(state, |(mut body, mut keep)| async move {
            loop {
                match body.frame().await {
                    None => {
                        if let Some((place, sender, pool)) = keep.take() {
                            pool.give_back(place, sender);
                        }
                        return None;
                    }
                    Some(Err(e)) => return Some((Err(http(e)), (body, None))),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Some((Ok(data), (body, keep)));
                        }
                    }
                }
            }
        });
        Answer {
            status,
            headers,
            body: Box::pin(body),
        }
    }
}

/// The pool's key for a trust: the CA bundle, or a marker no PEM text
/// can be (it starts with a NUL byte).
fn trust_key(trust: &Trust) -> Vec<u8> {
    match trust {
        Trust::Bundle(pem) => pem.clone(),
        Trust::Insecure => b"\0insecure".to_vec(),
    }
}

fn build(backend: &Backend, outgoing: Outgoing) -> Result<hyper::Request<Full<Bytes>>, ProxyError> {
    let mut builder = hyper::Request::builder()
        .method(outgoing.method.as_str())
        .uri(&outgoing.path)
        .header(hyper::header::HOST, &backend.server_name);
    for (name, value) in &outgoing.headers {
        builder = builder.header(name.as_str(), value.as_slice());
    }
    builder.body(Full::new(outgoing.body)).map_err(http)
}

fn http(why: impl std::fmt::Display) -> ProxyError {
    ProxyError::Http(why.to_string())
}
