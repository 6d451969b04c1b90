//! The controller manager inside another process (`capstan`,
//! `capstan-apiserver`), as k3s embeds kube-controller-manager: its own
//! thread and tokio runtime, talking to the API server over loopback HTTPS
//! with a client certificate of its own (`system:kube-controller-manager`),
//! so its writes pass authentication, authorization, admission and audit
//! like any client's. It leader-elects like a separate process: with
//! several API servers, one of them runs the controllers.

use capstan_client::connect::InlineCredentials;
pub use capstan_client::embed::Embedded;
use capstan_client::informer::Informer;
use k8s_openapi::api::core::v1::Pod;

use crate::config::Settings;

/// The settings for an embedded manager: kube's defaults, no health port
/// of its own (the API server's process has its own), unless given.
pub fn default_settings() -> Settings {
    Settings {
        secure_port: 0,
        ..Settings::defaults()
    }
}

/// Starts the manager on its own thread, connecting with `credentials`;
/// with `shared_pods`, its controllers use that pod informer of the host
/// process (see [`crate::manager::run`]).
pub fn start(
    credentials: InlineCredentials,
    settings: Settings,
    shared_pods: Option<Informer<Pod>>,
) -> std::io::Result<Embedded> {
    spawn(Some(credentials), settings, shared_pods)
}

/// Starts the manager on its own thread, connecting as `settings.kubeconfig` says.
pub fn start_from_kubeconfig(settings: Settings) -> std::io::Result<Embedded> {
    spawn(None, settings, None)
}

/// The manager on its own thread; stopping it (or dropping it) gives up
/// the lease and ends the thread.
fn spawn(
    credentials: Option<InlineCredentials>,
    settings: Settings,
    shared_pods: Option<Informer<Pod>>,
) -> std::io::Result<Embedded> {
    Embedded::start("controller-manager", move |stop| async move {
        let result = async {
            let clients = match &credentials {
                Some(credentials) => crate::connect_inline(credentials, &settings).await?,
                None => crate::connect(&settings).await?,
            };
            crate::manager::run(settings, clients, shared_pods, stop.cancelled_owned()).await
        };
        if let Err(err) = result.await {
            tracing::error!(%err, "embedded controller manager stopped");
        }
    })
}
