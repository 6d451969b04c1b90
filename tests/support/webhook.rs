//! An admission (or CRD conversion) webhook server for the tests: HTTPS on 127.0.0.1 with a
//! certificate from its own CA (rcgen), answering each AdmissionReview
//! with what a handler decides. A tiny HTTP/1.1 server (one request per
//! connection, `Connection: close`) on tokio and tokio-rustls, in its own
//! thread, so the synchronous tests can keep driving kubectl.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::certs::Authority;

/// What the server does with one review.
pub enum Reply {
    /// Answers with this `response` (the request's uid is put in).
    Review(Value),
    /// Answers only after this long (longer than the caller waits).
    Sleep(Duration),
    /// Answers 200 with a body that is not an AdmissionReview.
    Garbage,
}

pub type Handler = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// A running webhook server.
pub struct Webhook {
    pub port: u16,
    /// The CA that signed its certificate, PEM.
    pub ca_pem: String,
    calls: Arc<AtomicUsize>,
}

impl Webhook {
    /// Serves on a free loopback port with a certificate for 127.0.0.1
    /// and `names`, made (with its CA) in `dir`.
    pub fn start(dir: &Path, names: &[&str], handler: Handler) -> Webhook {
        let ca = Authority::new(dir, "webhook-ca");
        let mut sans = vec!["127.0.0.1"];
        sans.extend(names);
        let pair = ca.serving(dir, "webhook", &sans);
        let certs = CertificateDer::pem_file_iter(&pair.cert_file)
            .expect("read the webhook certificate")
            .collect::<Result<Vec<_>, _>>()
            .expect("PEM certificates");
        let key = PrivateKeyDer::from_pem_file(&pair.key_file).expect("the webhook key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the webhook's serving config");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the webhook");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the webhook");
            runtime.block_on(serve(listener, acceptor, handler, counted));
        });
        Webhook {
            port,
            ca_pem: std::fs::read_to_string(&ca.cert_file).expect("the CA file"),
            calls,
        }
    }

    /// How many reviews it was sent.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// `caBundle` as a configuration holds it (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        STANDARD.encode(&self.ca_pem)
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

/// Refuses objects whose label `key` is `value`, with `message` and 403.
pub fn deny_label(key: &'static str, value: &'static str, message: &'static str) -> Handler {
    Arc::new(move |review| {
        let labels = &review["request"]["object"]["metadata"]["labels"];
        if labels[key] == value {
            let status = json!({"code": 403, "reason": "Forbidden", "message": message});
            Reply::Review(json!({"allowed": false, "status": status}))
        } else {
            Reply::Review(json!({"allowed": true}))
        }
    })
}

/// Adds the label `key: value` with a JSONPatch (and the labels map when
/// the object has none).
pub fn add_label(key: &'static str, value: &'static str) -> Handler {
    Arc::new(move |review| {
        let object = &review["request"]["object"];
        let mut patch = Vec::new();
        if !object["metadata"]["labels"].is_object() {
            patch.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
        }
        let path = format!(
            "/metadata/labels/{}",
            key.replace('~', "~0").replace('/', "~1")
        );
        patch.push(json!({"op": "add", "path": path, "value": value}));
        let patch = STANDARD.encode(serde_json::to_vec(&patch).expect("JSON"));
        Reply::Review(json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}))
    })
}

/// Allows everything, unchanged.
pub fn allow() -> Handler {
    Arc::new(|_| Reply::Review(json!({"allowed": true})))
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: TlsAcceptor,
    handler: Handler,
    calls: Arc<AtomicUsize>,
) {
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, handler, calls) = (acceptor.clone(), handler.clone(), calls.clone());
        tokio::spawn(async move {
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                if let Some(body) = read_request(&mut tls).await {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let answer = answer(&handler, &body).await;
                    let _ = tls.write_all(&answer).await;
                    let _ = tls.shutdown().await;
                }
            }
        });
    }
}

/// The body of one HTTP/1.1 request (headers, then Content-Length bytes).
async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let start = end + 4;
            if data.len() >= start + length {
                return Some(data[start..start + length].to_vec());
            }
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    }
}

async fn answer(handler: &Handler, body: &[u8]) -> Vec<u8> {
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = match handler(&review) {
        Reply::Review(mut response) => {
            response["uid"] = review["request"]["uid"].clone();
            let version = review["apiVersion"].clone();
            // An AdmissionReview, or a CRD's ConversionReview.
            let kind = review["kind"].as_str().unwrap_or("AdmissionReview");
            json!({"apiVersion": version, "kind": kind, "response": response}).to_string()
        }
        Reply::Sleep(time) => {
            tokio::time::sleep(time).await;
            return Vec::new();
        }
        Reply::Garbage => "this is not an AdmissionReview".into(),
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    [head.into_bytes(), text.into_bytes()].concat()
}
