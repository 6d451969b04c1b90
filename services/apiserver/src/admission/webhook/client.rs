//! One webhook call: a POST over HTTPS (HTTP/1.1, rustls), trusting the
//! webhook's `caBundle` (or the system's roots when it has none). The
//! TLS configuration is built once per CA bundle, and connections are
//! kept open between calls (`pool.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::endpoint::{ResolveError, Target};
use super::pool::{Place, Pool, Sender};

/// The largest answer read from a webhook (kube's limit on request
/// bodies, 3 MiB).
const MAX_RESPONSE: usize = 3 * 1024 * 1024;

/// Why a call did not give an answer; the words follow kube's
/// (`Post "<url>": ...`) where it has them.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("Post \"{url}\": dial tcp {address}: {source}")]
    Connect {
        url: String,
        address: String,
        source: std::io::Error,
    },
    #[error("Post \"{url}\": tls: {why}")]
    Tls { url: String, why: String },
    #[error("Post \"{url}\": {why}")]
    Http { url: String, why: String },
    #[error("Post \"{0}\": context deadline exceeded")]
    Timeout(String),
    #[error("the server responded with the status code {code} but did not return a valid AdmissionReview ({body})")]
    Status { code: u16, body: String },
}

/// Builds and caches the TLS client configurations, and keeps
/// connections open between calls.
#[derive(Default)]
pub struct Client {
    configs: Mutex<HashMap<Vec<u8>, Arc<ClientConfig>>>,
    pool: Pool,
}

impl Client {
    /// POSTs `body` (JSON) to `target` and gives the 200 answer's body,
    /// on a kept connection when one is open.
    pub async fn post(
        &self,
        target: &Target,
        ca_bundle: Option<&[u8]>,
        body: Vec<u8>,
    ) -> Result<Bytes, CallError> {
        let place = Place {
            address: target.address.clone(),
            server_name: target.server_name.clone(),
            ca_bundle: ca_bundle.unwrap_or_default().to_vec(),
        };
        let mut request = build_request(target, body)?;
        if let Some(mut sender) = self.pool.take(&place) {
            if sender.ready().await.is_ok() {
                match sender.try_send_request(request).await {
                    Ok(response) => return self.finish(target, place, sender, response).await,
                    // Closed before the request went out: it goes on a
                    // new connection. Sent and then lost is an error.
                    Err(mut failed) => match failed.take_message() {
                        Some(unsent) => request = unsent,
                        None => return Err(http(target, failed.into_error())),
                    },
                }
            }
        }
        let mut sender = self.connect(target, ca_bundle).await?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| http(target, e))?;
        self.finish(target, place, sender, response).await
    }

    /// A new connection, driven by its own task for as long as it lives.
    async fn connect(
        &self,
        target: &Target,
        ca_bundle: Option<&[u8]>,
    ) -> Result<Sender, CallError> {
        let config = self.config(ca_bundle).map_err(|why| tls(target, why))?;
        let tcp = TcpStream::connect(&target.address)
            .await
            .map_err(|source| CallError::Connect {
                url: target.url.clone(),
                address: target.address.clone(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(target.server_name.clone())
            .map_err(|err| tls(target, err.to_string()))?;
        let stream = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|err| tls(target, err.to_string()))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| http(target, e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Reads the answer whole; the connection then waits for the next call.
    async fn finish(
        &self,
        target: &Target,
        place: Place,
        sender: Sender,
        response: hyper::Response<hyper::body::Incoming>,
    ) -> Result<Bytes, CallError> {
        let code = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_RESPONSE);
        let bytes = body
            .collect()
            .await
            .map_err(|e| http(target, e))?
            .to_bytes();
        self.pool.give_back(place, sender);
        match code {
            200 => Ok(bytes),
            _ => Err(CallError::Status {
                code,
                body: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            }),
        }
    }

    fn config(&self, ca_bundle: Option<&[u8]>) -> Result<Arc<ClientConfig>, String> {
        let key = ca_bundle.unwrap_or_default().to_vec();
        if let Some(config) = self.configs.lock().expect("webhook TLS cache").get(&key) {
            return Ok(config.clone());
        }
        let config = Arc::new(client_config(ca_bundle)?);
        let mut configs = self.configs.lock().expect("webhook TLS cache");
        configs.insert(key, config.clone());
        Ok(config)
    }
}

fn build_request(target: &Target, body: Vec<u8>) -> Result<hyper::Request<Full<Bytes>>, CallError> {
    hyper::Request::post(&target.path)
        .header(hyper::header::HOST, &target.server_name)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| http(target, e))
}

fn http(target: &Target, why: impl std::fmt::Display) -> CallError {
    CallError::Http {
        url: target.url.clone(),
        why: why.to_string(),
    }
}

fn tls(target: &Target, why: impl Into<String>) -> CallError {
    CallError::Tls {
        url: target.url.clone(),
        why: why.into(),
    }
}

/// A client trusting `ca_bundle` (or the system's roots), without a certificate of its own.
fn client_config(ca_bundle: Option<&[u8]>) -> Result<ClientConfig, String> {
    let roots = ca_bundle_roots(ca_bundle.unwrap_or_default())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// The certificates of a `caBundle` (PEM), or the system's roots when it
/// is empty: how webhooks and aggregated API servers are trusted.
pub fn ca_bundle_roots(pem_bytes: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if pem_bytes.is_empty() {
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        return Ok(roots);
    }
    let certs = pem::parse_many(pem_bytes).map_err(|e| format!("caBundle: {e}"))?;
    for cert in certs.iter().filter(|c| c.tag() == "CERTIFICATE") {
        let der = rustls::pki_types::CertificateDer::from(cert.contents().to_vec());
        roots.add(der).map_err(|e| format!("caBundle: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle: no certificates".into());
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio_rustls::TlsAcceptor;

    use super::*;

    /// A keep-alive HTTPS server answering every POST with `{"n": <i>}`;
    /// the count of connections it accepted, and its CA (self-signed) PEM.
    async fn keep_alive_server(closing: bool) -> (String, Arc<AtomicUsize>, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["hook.test".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], der)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = accepted.clone();
        tokio::spawn(async move {
            let mut served = 0;
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let mut tls = acceptor.accept(tcp).await.unwrap();
                while answer_one(&mut tls, served, closing).await {
                    served += 1;
                    if closing {
                        break;
                    }
                }
            }
        });
        (address, accepted, cert.pem())
    }

    /// Reads one request (headers and a Content-Length body) and answers.
    async fn answer_one<S: AsyncReadExt + AsyncWriteExt + Unpin>(
        s: &mut S,
        n: usize,
        close: bool,
    ) -> bool {
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.unwrap_or(0) == 0 {
                return false;
            }
            seen.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&seen).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        s.read_exact(&mut body).await.unwrap();
        let answer = format!("{{\"n\": {n}}}");
        let connection = if close { "Connection: close\r\n" } else { "" };
        let reply = format!(
            "HTTP/1.1 200 OK\r\n{connection}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        );
        s.write_all(reply.as_bytes()).await.is_ok()
    }

    fn target(address: &str) -> Target {
        Target {
            address: address.to_string(),
            server_name: "hook.test".into(),
            path: "/".into(),
            url: format!("https://hook.test/ ({address})"),
        }
    }

    #[tokio::test]
    async fn calls_to_one_webhook_share_a_kept_connection() {
        let (address, accepted, ca) = keep_alive_server(false).await;
        let client = Client::default();
        for n in 0..5 {
            let body = client
                .post(&target(&address), Some(ca.as_bytes()), b"{}".to_vec())
                .await
                .unwrap();
            assert_eq!(body, format!("{{\"n\": {n}}}").as_bytes());
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "one connection for five calls"
        );
    }

    #[tokio::test]
    async fn a_webhook_that_closes_each_connection_gets_a_new_one() {
        let (address, accepted, ca) = keep_alive_server(true).await;
        let client = Client::default();
        for _ in 0..3 {
            client
                .post(&target(&address), Some(ca.as_bytes()), b"{}".to_vec())
                .await
                .unwrap();
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}
