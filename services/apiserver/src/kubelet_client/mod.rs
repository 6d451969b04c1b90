//! How this server reaches a node's kubelet (kube-apiserver's kubelet
//! client): the node's address (`address`), TLS with the kubelet client
//! certificate (`--kubelet-client-certificate`), the kubelet's serving
//! certificate checked against `--kubelet-certificate-authority` (not at
//! all without one, as kube), and connections bounded by
//! `--kubelet-timeout`. The connections themselves are the aggregator's
//! ([`Proxy`]): a streamed GET for a log, a TLS stream a websocket is
//! opened over for exec and attach.

pub mod address;
pub mod settings;

use std::sync::{Arc, Once};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use self::address::{kubelet_of, AddressType, NoAddress};
use self::settings::Settings;
use crate::admission::objects::{Freshness, Objects, Resource};
use crate::aggregator::proxy::{Answer, Outgoing, Proxy, ProxyError};
use crate::aggregator::resolve::Backend;
use crate::aggregator::tls::{Configs, Trust};
use crate::registry::subresource::Location;
use crate::serving::tls::TlsError;

const NODES: Resource = Resource {
    group: "",
    resource: "nodes",
};

/// The largest websocket message relayed from a kubelet.
const MAX_MESSAGE: usize = 4 << 20;

/// A websocket to a kubelet, over TLS.
pub type KubeletSocket = WebSocketStream<TlsStream<TcpStream>>;

/// Why a kubelet could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("nodes \"{0}\" not found")]
    NodeNotFound(String),
    #[error(transparent)]
    NoAddress(#[from] NoAddress),
    #[error("{0}")]
    Lookup(String),
    #[error("error dialing backend: {0}")]
    Dial(#[from] ProxyError),
    #[error("error dialing backend: dial tcp {0}: i/o timeout")]
    Timeout(String),
    /// The kubelet answered the upgrade with a refusal of its own.
    #[error("the kubelet answered {status}")]
    Refused { status: u16, body: Vec<u8> },
    #[error("error upgrading connection: {0}")]
    Upgrade(String),
}

pub struct KubeletClient {
    proxy: Proxy,
    /// The kubelets' CA; None: they are not verified.
    authority: Option<Vec<u8>>,
    timeout: Duration,
    preferred: Vec<AddressType>,
    objects: Arc<dyn Objects>,
    warned_unverified: Once,
}

impl KubeletClient {
    pub fn new(settings: &Settings, objects: Arc<dyn Objects>) -> Result<KubeletClient, TlsError> {
        let identity = settings.client_identity()?;
        if identity.is_none() {
            tracing::warn!("no --kubelet-client-certificate: kubelets will see no client certificate and refuse pods/log, exec and attach");
        }
        Ok(KubeletClient {
            proxy: Proxy::new(Configs::for_flag(identity, "--kubelet-client-certificate")),
            authority: settings.certificate_authority()?,
            timeout: settings.timeout,
            preferred: settings.preferred_address_types.clone(),
            objects,
            warned_unverified: Once::new(),
        })
    }

    /// The kubelet of the node `location` names.
    pub async fn kubelet(&self, node: &str) -> Result<Backend, KubeletError> {
        let found = self.objects.get(NODES, "", node, Freshness::Cached).await;
        let found = found.map_err(|e| KubeletError::Lookup(e.to_string()))?;
        let node_object = found.ok_or_else(|| KubeletError::NodeNotFound(node.to_string()))?;
        Ok(kubelet_of(&node_object, &self.preferred).await?)
    }

    fn trust(&self, location: &Location) -> Trust {
        match (&self.authority, location.insecure) {
            (Some(pem), false) => Trust::Bundle(pem.clone()),
            (None, false) => {
                self.warned_unverified.call_once(|| {
                    tracing::warn!("no --kubelet-certificate-authority: kubelets' serving certificates are not verified");
                });
                Trust::Insecure
            }
            (_, true) => Trust::Insecure,
        }
    }

    /// A GET of `location` on `kubelet`, its answer streamed as it comes.
    pub async fn get(
        &self,
        kubelet: &Backend,
        location: &Location,
    ) -> Result<Answer, KubeletError> {
        let outgoing = Outgoing {
            method: "GET".into(),
            path: location.path.clone(),
            headers: Vec::new(),
            body: Default::default(),
        };
        let trust = self.trust(location);
        let sent = self.proxy.send(kubelet, &trust, outgoing);
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(KubeletError::Timeout(kubelet.address.clone())),
        }
    }

    /// A websocket to `location` on `kubelet`, offering `protocols`;
    /// with the protocol the kubelet chose.
    pub async fn websocket(
        &self,
        kubelet: &Backend,
        location: &Location,
        protocols: &[String],
    ) -> Result<(KubeletSocket, Option<String>), KubeletError> {
        let trust = self.trust(location);
        let dialed = self.proxy.dial(kubelet, &trust);
        let stream = match tokio::time::timeout(self.timeout, dialed).await {
            Ok(stream) => stream?,
            Err(_) => return Err(KubeletError::Timeout(kubelet.address.clone())),
        };
        let url = format!("wss://{}{}", kubelet.address, location.path);
        let mut request = url
            .into_client_request()
            .map_err(|e| KubeletError::Upgrade(e.to_string()))?;
        if !protocols.is_empty() {
            let offered = HeaderValue::from_str(&protocols.join(", "))
                .map_err(|e| KubeletError::Upgrade(e.to_string()))?;
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", offered);
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let handshake = tokio_tungstenite::client_async_with_config(request, stream, Some(config));
        let (socket, response) = match tokio::time::timeout(self.timeout, handshake).await {
            Err(_) => return Err(KubeletError::Timeout(kubelet.address.clone())),
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(refused))) => {
                let status = refused.status().as_u16();
                let body = refused.into_body().unwrap_or_default();
                return Err(KubeletError::Refused { status, body });
            }
            Ok(Err(e)) => return Err(KubeletError::Upgrade(e.to_string())),
            Ok(Ok(done)) => done,
        };
        let chosen = response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok((socket, chosen))
    }
}
