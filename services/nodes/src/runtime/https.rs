//! Starts the HTTPS listener (kubelet API and metrics.k8s.io) once the
//! API can be asked who the callers are and what they may do, and
//! registers the metrics API with the aggregator.

use std::net::IpAddr;
use std::sync::Arc;

use axum::routing::get;
use capstan_client::informer::{InformerOptions, Informers};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use tokio::net::TcpListener;

use crate::error::Error;
use crate::node::template::SIMULATED_LABEL;
use crate::serving::authentication::Authentication;
use crate::serving::authorization::Authorizer;
use crate::serving::{certificates, listener, Serving};
use crate::settings::Settings;
use crate::{kubelet, metrics_api};
use capstan_client::informer::{Informer, InformerEvent};

use super::fleet::SharedFleet;
use super::retry;

/// Binds the listener first: its port is every node's daemon endpoint.
pub async fn bind(settings: &Settings) -> Result<TcpListener, Error> {
    let address = format!(
        "{}:{}",
        settings.template.address, settings.template.kubelet_port
    );
    TcpListener::bind(&address)
        .await
        .map_err(|source| Error::Serve {
            what: "the kubelet and metrics APIs",
            address,
            source,
        })
}

/// Everything the listener needs from the rest of the process.
pub struct Parts {
    pub fleet: SharedFleet,
    pub pods: Informer<Pod>,
    pub informers: Informers,
    pub client: kube::Client,
    pub stopped: tokio::sync::watch::Receiver<bool>,
}

/// The TLS settings and who to trust, once the API can be read.
async fn prepare(
    settings: &Settings,
    client: &kube::Client,
) -> Result<(rustls::ServerConfig, Arc<Authentication>, Option<String>), Error> {
    let authentication = Authentication::load(client, settings.tls.client_ca.as_deref()).await?;
    let certificate = match &settings.tls.cert_and_key {
        Some((cert, key)) => {
            certificates::from_files(cert, key, settings.tls.metrics_ca.as_deref())?
        }
        None => {
            let address: IpAddr = settings
                .template
                .address
                .parse()
                .map_err(|_| Error::Tls("the node address is not an IP address".into()))?;
            certificates::generate(address, &metrics_api::register::service_names())?
        }
    };
    let ca_pem = certificate.ca_pem.clone();
    let config = listener::tls_config(certificate, &authentication)?;
    Ok((config, Arc::new(authentication), ca_pem))
}

/// Serves on `listener` and registers the metrics API.
pub async fn start(settings: &Settings, listener: TcpListener, parts: Parts) -> Result<(), Error> {
    let (config, authentication, ca_pem) = retry("prepare the HTTPS listener", || {
        prepare(settings, &parts.client)
    })
    .await?;
    let nodes: Informer<Node> = parts
        .informers
        .get_with(InformerOptions::default().labels(&format!("{SIMULATED_LABEL}=true")));
    nodes.wait_synced().await;
    follow_own_nodes(&nodes, parts.fleet.clone());
    let state = Arc::new(Serving {
        authentication: authentication.clone(),
        authorizer: Authorizer::new(parts.client.clone()),
        fleet: parts.fleet,
        pods: parts.pods,
        nodes,
    });
    let app = kubelet::routes()
        .merge(metrics_api::routes())
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state);
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    tokio::spawn(listener::serve(
        listener,
        config,
        authentication,
        app,
        parts.stopped,
    ));
    if settings.register_metrics_api {
        let (client, address, ca) = (&parts.client, &settings.template.address, ca_pem.as_deref());
        retry("register metrics.k8s.io", || {
            metrics_api::register::register(client, address, port, ca)
        })
        .await?;
    }
    tracing::info!(port, "serving the kubelet API and metrics.k8s.io");
    Ok(())
}

/// Each node keeps its Node object as the API last showed it, as a
/// kubelet reads its own from a lister: taints and labels that the node
/// lifecycle controller or a user changes count at once in the pods'
/// admission, not only after the node's next status write (up to 5
/// minutes later: an `unreachable` taint already removed kept failing
/// every pod bound to the node until then).
fn follow_own_nodes(nodes: &Informer<Node>, fleet: SharedFleet) {
    nodes.add_handler(move |event: &InformerEvent<Node>| {
        if matches!(event, InformerEvent::Deleted(_)) {
            return;
        }
        let node = event.object();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(simulated) = fleet.get(name) {
            let mut state = simulated.state.lock();
            // Someone else wrote the Ready condition (the node lifecycle
            // controller's Unknown while the API was out of reach): the
            // next check reports in full, as a kubelet comparing with the
            // server's copy would, instead of trusting what it last sent.
            let reported = state
                .status
                .as_ref()
                .and_then(|s| ready(s.conditions.as_deref()));
            let served = node
                .status
                .as_ref()
                .and_then(|s| ready(s.conditions.as_deref()));
            if reported.is_some() && served != reported {
                state.status = None;
            }
            state.node = Some(node.clone());
        }
    });
}

/// The status of the Ready condition among `conditions`.
fn ready(conditions: Option<&[NodeCondition]>) -> Option<String> {
    let ready = conditions?.iter().find(|c| c.type_ == "Ready")?;
    Some(ready.status.clone())
}
