//! The accept loop: TLS (the client certificate, if any, classified once
//! per connection), then HTTP/1.1 or HTTP/2 with upgrades (exec's
//! websockets), each request carrying its connection's [`Peer`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::authentication::Authentication;
use super::certificates::Serving as Certificate;
use crate::error::Error;

/// A client has this long to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The TLS settings: the serving certificate, client certificates
/// checked by `authentication`'s CAs but not required.
pub fn tls_config(
    certificate: Certificate,
    authentication: &Authentication,
) -> Result<rustls::ServerConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_client_cert_verifier(authentication.tls_verifier()?)
        .with_single_cert(certificate.chain, certificate.key)
        .map_err(|e| Error::Tls(format!("the serving certificate: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves `app` on `listener` until `stopped` turns true.
pub async fn serve(
    listener: TcpListener,
    config: rustls::ServerConfig,
    authentication: Arc<Authentication>,
    app: Router,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(config));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => return,
        };
        let Ok((tcp, _)) = accepted else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, authentication, app) =
            (acceptor.clone(), authentication.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await else {
                return;
            };
            let peer = authentication.peer(tls.get_ref().1.peer_certificates());
            let service = app.map_request(
                move |mut request: axum::http::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(peer.clone());
                    request
                },
            );
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(
                    TokioIo::new(tls),
                    TowerToHyperService::new(service),
                )
                .await;
        });
    }
}
