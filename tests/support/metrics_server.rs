//! A small aggregated API server for the tests: metrics.k8s.io/v1beta1
//! PodMetrics and NodeMetrics over HTTPS (a certificate from its own CA,
//! for `<service>.<namespace>.svc`), answering only requests that come
//! with a front-proxy client certificate (signed by the CA it is given,
//! CN `front-proxy-client`) and an X-Remote-User header, as a real
//! extension API server checks them. Kept-alive HTTP/1.1 on tokio and
//! tokio-rustls in its own thread; a `watch=1` request gets one event
//! and stays open. Stopping it drops its runtime: every connection
//! closes and the port stops answering.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::certs::Authority;

/// What the server saw of one request that reached it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    /// Header name (lower case) → every value.
    pub headers: HashMap<String, Vec<String>>,
}

pub struct MetricsServer {
    pub port: u16,
    pub ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl MetricsServer {
    /// Serves on a free loopback port as `name`.`namespace`.svc, trusting
    /// front proxies signed by the CA in `front_proxy_ca` (PEM file).
    pub fn start(dir: &Path, name: &str, namespace: &str, front_proxy_ca: &Path) -> MetricsServer {
        let ca = Authority::new(dir, "metrics-ca");
        let host = format!("{name}.{namespace}.svc");
        let pair = ca.serving(dir, "metrics", &[host.as_str(), "127.0.0.1"]);
        let certs = CertificateDer::pem_file_iter(&pair.cert_file)
            .expect("read the certificate")
            .collect::<Result<Vec<_>, _>>()
            .expect("PEM certificates");
        let key = PrivateKeyDer::from_pem_file(&pair.key_file).expect("the key");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(front_proxy_ca).expect("the front-proxy CA") {
            roots.add(cert.expect("a PEM certificate")).expect("a CA");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.into(),
            provider.clone(),
        )
        .build()
        .expect("a client verifier");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .expect("the serving config");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("its address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                tokio::select! {
                    _ = serve(listener, acceptor, recorded) => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        });
        MetricsServer {
            port,
            ca_pem: std::fs::read_to_string(&ca.cert_file).expect("the CA file"),
            seen,
            stop: Some(stop),
        }
    }

    /// The requests that reached it, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Stops answering: its port is closed, its connections dropped.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: TlsAcceptor,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, seen) = (acceptor.clone(), seen.clone());
        tokio::spawn(async move {
            // A client without a certificate the CA signed fails here.
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let proxy_name = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| common_name(&c[0]));
            let mut stream = BufReader::new(tls);
            while let Some(request) = read_request(&mut stream).await {
                seen.lock().unwrap().push(request.clone());
                let trusted = proxy_name.as_deref() == Some("front-proxy-client");
                let (status, body) = match (trusted, request.headers.get("x-remote-user")) {
                    (true, Some(_)) => answer(&request.path),
                    _ => (
                        401,
                        json!({"kind": "Status", "code": 401, "message": "Unauthorized"}),
                    ),
                };
                if request.path.contains("watch=1") && status == 200 {
                    let _ = stream_one_event(stream.get_mut(), &body).await;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                let text = body.to_string();
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    text.len()
                );
                let out = stream.get_mut();
                if out.write_all((head + &text).as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let cn = parsed.subject().iter_common_name().next()?;
    Some(cn.as_str().ok()?.to_string())
}

async fn read_request<S: tokio::io::AsyncRead + Unpin>(stream: &mut BufReader<S>) -> Option<Seen> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers: HashMap<String, Vec<String>> = HashMap::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers
            .entry(name.trim().to_lowercase())
            .or_default()
            .push(value.trim().to_string());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v[0].parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(Seen { path, headers })
}

/// One watch event, chunked, and the stream left open.
async fn stream_one_event<S: tokio::io::AsyncWrite + Unpin>(
    out: &mut S,
    list: &Value,
) -> std::io::Result<()> {
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    out.write_all(head.as_bytes()).await?;
    let object = list["items"].get(0).cloned().unwrap_or(Value::Null);
    let event = format!("{}\n", json!({"type": "ADDED", "object": object}));
    out.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
        .await?;
    out.flush().await
}

/// The answer to a path of metrics.k8s.io/v1beta1.
fn answer(path_and_query: &str) -> (u16, Value) {
    let path = path_and_query.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["apis", "metrics.k8s.io", "v1beta1"] => (200, resource_list()),
        ["apis", "metrics.k8s.io", "v1beta1", "namespaces", namespace, "pods"] => {
            (200, pod_metrics(namespace))
        }
        ["apis", "metrics.k8s.io", "v1beta1", "nodes"] => (200, node_metrics()),
        _ => (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "code": 404, "reason": "NotFound", "message": "not found"}),
        ),
    }
}

fn resource_list() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1",
        "resources": [
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]}]})
}

fn pod_metrics(namespace: &str) -> Value {
    let pod = |name: &str, cpu: &str, memory: &str| {
        json!({"metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
               "timestamp": "2026-01-01T00:00:00Z", "window": "30s",
               "containers": [{"name": "app", "usage": {"cpu": cpu, "memory": memory}}]})
    };
    json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {},
           "items": [pod("web-1", "250m", "64Mi"), pod("web-2", "1500m", "128Mi")]})
}

fn node_metrics() -> Value {
    json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {},
           "items": [{"metadata": {"name": "node-1", "creationTimestamp": "2026-01-01T00:00:00Z"},
                      "timestamp": "2026-01-01T00:00:00Z", "window": "30s",
                      "usage": {"cpu": "2", "memory": "4Gi"}}]})
}
