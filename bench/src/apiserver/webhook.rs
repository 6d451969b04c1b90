//! The webhook variant (`--api-webhook`): a no-op mutating admission
//! webhook (allows, no patch) served over HTTPS from this process, and a
//! MutatingWebhookConfiguration on every API server that sends it every
//! ConfigMap create; so the timed creates pay for one webhook call each
//! (the AdmissionReview on a kept-alive TLS connection, the answer checked).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::error::ApiError;
use super::http::Connection;
use super::prepare::{create, expect_created};
use super::GET_NAMESPACE;

static ON: AtomicBool = AtomicBool::new(false);

/// Turns the variant on for the rest of the run.
pub fn enable() {
    ON.store(true, Ordering::SeqCst);
}

/// With the variant on: starts a webhook for this API server and
/// configures it, then waits until a create reaches the webhook (probe
/// creates go to the get workload's namespace, so the creates'
/// namespace holds only timed creates).
pub async fn install(http: &mut Connection) -> Result<(), ApiError> {
    if !ON.load(Ordering::SeqCst) {
        return Ok(());
    }
    let setup = |why: String| ApiError::Webhook(why);
    let (port, ca_pem, calls) = serve().await.map_err(setup)?;
    let base64 = STANDARD.encode(ca_pem.as_bytes());
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "bench-noop"},
        "webhooks": [{
            "name": "noop.bench.capstan", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/"), "caBundle": base64},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        }],
    });
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let answer = http.post(path, Bytes::from(config.to_string())).await?;
    expect_created(
        &answer,
        "create the bench's MutatingWebhookConfiguration".into(),
    )?;
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0.. {
        create(http, GET_NAMESPACE, &format!("webhook-probe-{i}")).await?;
        if calls.load(Ordering::SeqCst) > 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(setup("creates never reached the webhook".into()))
}

/// A webhook on a free loopback port: its port, its CA (PEM) and the count
/// of reviews it answered.
async fn serve() -> Result<(u16, String, Arc<AtomicUsize>), String> {
    let (ca_pem, cert, key) = certificates().map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(vec![cert], key))
        .map_err(|e| e.to_string())?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, calls) = (acceptor.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // Kept alive, as a real webhook server is: one request
                // at a time (HTTP/1.1 without pipelining).
                while let Some(review) = read_review(&mut tls).await {
                    calls.fetch_add(1, Ordering::SeqCst);
                    if tls.write_all(&allow(&review)).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok((port, ca_pem, calls))
}

/// A CA and a serving certificate for 127.0.0.1 it signed.
fn certificates() -> Result<(String, CertificateDer<'static>, PrivateKeyDer<'static>), rcgen::Error>
{
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let cert =
        CertificateParams::new(vec!["127.0.0.1".to_string()])?.signed_by(&key, &ca, &ca_key)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((ca.pem(), cert.der().clone(), der))
}

/// The AdmissionReview of one HTTP/1.1 request (Content-Length body).
async fn read_review<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<Value> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())?;
            if data.len() >= end + 4 + length {
                return serde_json::from_slice(&data[end + 4..end + 4 + length]).ok();
            }
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&chunk[..n]);
    }
}

/// An allowing answer to `review`, as the whole HTTP response.
fn allow(review: &Value) -> Vec<u8> {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true}})
    .to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.into_bytes(), body.into_bytes()].concat()
}
