//! Connections to the API: a `kube::Client` from a kubeconfig file or
//! from inline parts, with the component's user agent and client-side
//! rate limiting, and clients that send *as* another user over the same
//! connections (impersonation).
//!
//! One [`Connection`] per component: its HTTPS connection pool and its
//! rate-limit bucket are shared by every `kube::Client` made from it.

mod kubeconfig;
mod rate_limit;
mod transport;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use kube::client::Body;
use serde::Deserialize;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder};

pub use kubeconfig::{config_from_file, config_from_inline, InlineCredentials};
pub use rate_limit::{RateLimitLayer, RateLimited};
pub use transport::https as https_transport;

use crate::error::{Error, Result};
use crate::rate::TokenBucket;

/// The body of a response, whatever transport made it.
pub type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// The shared transport under every client of a [`Connection`]: HTTPS
/// to a server, or an in-memory API in tests.
pub type Transport = BoxCloneSyncService<Request<Body>, Response<ResponseBody>, BoxError>;

/// How a component connects, with kube-controller-manager's flag names
/// (`--kubeconfig`, `--kube-api-qps`, `--kube-api-burst`), so a
/// component's `config` settings can embed it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ClientSettings {
    /// The kubeconfig file; `None` for an in-process component that is
    /// handed [`InlineCredentials`].
    pub kubeconfig: Option<PathBuf>,
    /// Requests per second; `<= 0` means unlimited.
    pub kube_api_qps: f32,
    /// Requests that may go at once after a quiet spell.
    pub kube_api_burst: u32,
}

impl Default for ClientSettings {
    /// kube-controller-manager's defaults: 20 requests/s, bursts of 30.
    fn default() -> ClientSettings {
        ClientSettings {
            kubeconfig: None,
            kube_api_qps: 20.0,
            kube_api_burst: 30,
        }
    }
}

/// A component's connection to the API. Cheap to clone; clones share the
/// connection pool and the rate-limit bucket.
#[derive(Clone)]
pub struct Connection {
    transport: Transport,
    bucket: Arc<TokenBucket>,
    user_agent: HeaderValue,
    default_namespace: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("user_agent", &self.user_agent)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects as the kubeconfig file in `settings` says; `component`
    /// names the user agent (`kube-scheduler`, `capstan-nodes`, ...).
    pub async fn from_settings(settings: &ClientSettings, component: &str) -> Result<Connection> {
        let path = settings.kubeconfig.as_ref().ok_or_else(|| {
            Error::Settings("no --kubeconfig given and no in-process credentials".into())
        })?;
        let config = config_from_file(path).await?;
        Connection::from_config(config, settings, component)
    }

    /// Connects with inline parts (a component in the API server's process).
    pub async fn from_inline(
        credentials: &InlineCredentials,
        settings: &ClientSettings,
        component: &str,
    ) -> Result<Connection> {
        let config = config_from_inline(credentials).await?;
        Connection::from_config(config, settings, component)
    }

    /// Connects with a kube-rs `Config` made elsewhere.
    pub fn from_config(
        config: kube::Config,
        settings: &ClientSettings,
        component: &str,
    ) -> Result<Connection> {
        let namespace = config.default_namespace.clone();
        let transport = transport::https(&config)?;
        Connection::over(transport, namespace, settings, component)
    }

    /// A connection over any transport: the in-memory API of the
    /// `testing` module in unit tests.
    pub fn over(
        transport: Transport,
        default_namespace: String,
        settings: &ClientSettings,
        component: &str,
    ) -> Result<Connection> {
        let user_agent =
            HeaderValue::from_str(&transport::user_agent(component)).map_err(|_| {
                Error::Settings(format!("component name {component:?} is not a header"))
            })?;
        Ok(Connection {
            transport,
            bucket: Arc::new(TokenBucket::new(
                f64::from(settings.kube_api_qps),
                settings.kube_api_burst,
            )),
            user_agent,
            default_namespace,
        })
    }

    /// A client acting as the component's own identity.
    pub fn client(&self) -> kube::Client {
        self.client_with(Vec::new())
    }

    /// A client whose requests are sent as `user` in `groups`
    /// (`Impersonate-User` / `Impersonate-Group`), over the same
    /// connections and rate limit. The component's own identity must be
    /// allowed to `impersonate` them. Make one per identity and keep it:
    /// each client has a small dispatch task of its own.
    pub fn impersonating(&self, user: &str, groups: &[&str]) -> Result<kube::Client> {
        let header = |value: &str| {
            HeaderValue::from_str(value)
                .map_err(|_| Error::Settings(format!("{value:?} cannot be sent in a header")))
        };
        let mut headers = vec![(HeaderName::from_static("impersonate-user"), header(user)?)];
        for group in groups {
            headers.push((HeaderName::from_static("impersonate-group"), header(group)?));
        }
        Ok(self.client_with(headers))
    }

    fn client_with(&self, extra: Vec<(HeaderName, HeaderValue)>) -> kube::Client {
        let user_agent = self.user_agent.clone();
        let extra = Arc::new(extra);
        let service = ServiceBuilder::new()
            .map_request(move |mut request: Request<Body>| {
                let headers = request.headers_mut();
                headers.insert(http::header::USER_AGENT, user_agent.clone());
                for (name, value) in extra.iter() {
                    headers.append(name.clone(), value.clone());
                }
                request
            })
            .layer(RateLimitLayer::new(self.bucket.clone()))
            .service(self.transport.clone());
        kube::Client::new(service, self.default_namespace.clone())
    }
}

#[cfg(test)]
mod tests;
