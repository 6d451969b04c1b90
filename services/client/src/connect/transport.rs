//! The HTTPS transport kube-rs would build for a `Config` (TLS from the
//! kubeconfig, timeouts, base URI, authorization header), kept as one
//! cloneable service so several clients share its connection pool.

use http::Response;
use http_body_util::BodyExt;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder};

use super::Transport;
use crate::error::Result;

/// The pooled HTTPS transport for `config`: what a [`super::Connection`]
/// sends through, for a caller that adds a layer of its own (a bearer
/// token that is refreshed, for example) before [`super::Connection::over`].
pub fn https(config: &kube::Config) -> Result<Transport> {
    let mut connector = TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client: HyperClient<_, Body> = HyperClient::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_response(|response: Response<_>| {
            response.map(|body: hyper::body::Incoming| body.map_err(BoxError::from).boxed_unsync())
        })
        .map_err(BoxError::from)
        .service(client);
    Ok(BoxCloneSyncService::new(service))
}

/// `<component>/v<version> (<os>/<arch>) capstan`, the shape of
/// client-go's default user agent.
pub(super) fn user_agent(component: &str) -> String {
    format!(
        "{component}/v{} ({}/{}) capstan",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}
