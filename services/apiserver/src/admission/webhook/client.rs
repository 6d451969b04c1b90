//! One webhook call: a POST over HTTPS (HTTP/1.1, rustls), trusting the
//! webhook's `caBundle` (or the system's roots when it has none). Each
//! call opens its own connection; the TLS configuration is built once per
//! CA bundle.

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

/// Builds and caches the TLS client configurations.
#[derive(Default)]
pub struct Client {
    configs: Mutex<HashMap<Vec<u8>, Arc<ClientConfig>>>,
}

impl Client {
    /// POSTs `body` (JSON) to `target` and gives the 200 answer's body.
    pub async fn post(
        &self,
        target: &Target,
        ca_bundle: Option<&[u8]>,
        body: Vec<u8>,
    ) -> Result<Bytes, CallError> {
        let config = self.config(ca_bundle).map_err(|why| tls(target, why))?;
        let tcp = TcpStream::connect(&target.address)
            .await
            .map_err(|source| CallError::Connect {
                url: target.url.clone(),
                address: target.address.clone(),
                source,
            })?;
        let name = ServerName::try_from(target.server_name.clone())
            .map_err(|err| tls(target, err.to_string()))?;
        let stream = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|err| tls(target, err.to_string()))?;
        exchange(target, TokioIo::new(stream), body).await
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

fn tls(target: &Target, why: impl Into<String>) -> CallError {
    CallError::Tls {
        url: target.url.clone(),
        why: why.into(),
    }
}

/// The roots: the PEM certificates of `ca_bundle`, or the system's.
fn client_config(ca_bundle: Option<&[u8]>) -> Result<ClientConfig, String> {
    let mut roots = RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(pem_bytes) => {
            let certs = pem::parse_many(pem_bytes).map_err(|e| format!("caBundle: {e}"))?;
            for cert in certs.iter().filter(|c| c.tag() == "CERTIFICATE") {
                let der = rustls::pki_types::CertificateDer::from(cert.contents().to_vec());
                roots.add(der).map_err(|e| format!("caBundle: {e}"))?;
            }
            if roots.is_empty() {
                return Err("caBundle: no certificates".into());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// One HTTP/1.1 request on the connection, the connection driven beside
/// it until the answer's body is read.
async fn exchange<S>(target: &Target, io: TokioIo<S>, body: Vec<u8>) -> Result<Bytes, CallError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let http = |why: String| CallError::Http {
        url: target.url.clone(),
        why,
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| http(e.to_string()))?;
    let request = hyper::Request::post(&target.path)
        .header(hyper::header::HOST, &target.server_name)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| http(e.to_string()))?;
    let call = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| http(e.to_string()))?;
        let code = response.status().as_u16();
        let body = Limited::new(response.into_body(), MAX_RESPONSE);
        let bytes = body
            .collect()
            .await
            .map_err(|e| http(e.to_string()))?
            .to_bytes();
        match code {
            200 => Ok(bytes),
            _ => Err(CallError::Status {
                code,
                body: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned(),
            }),
        }
    };
    // The connection future ends when the exchange does; the call's own
    // result says whether the answer came.
    let drive = async {
        let _ = connection.await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        result = call => result,
        _ = drive => unreachable!("pending never ends"),
    }
}
