//! capstan-controller-manager: kube-controller-manager's loops as an
//! ordinary API client. It never imports the API server: it reaches the
//! API through `capstan-client` (shared informers, work queues, leader
//! election, events) over HTTPS, inside `capstan` too.
//!
//! A tour, in the order things happen:
//!
//! 1. [`config`]: kube-controller-manager's flags, layered through the
//!    `config` crate; [`identity`]: the manager's client, and with
//!    `--use-service-account-credentials` one service account per controller.
//! 2. [`manager`]: health and metrics; leader election on the Lease
//!    `kube-system/kube-controller-manager`; per leadership term, fresh
//!    shared informers and every selected controller ([`controllers`]),
//!    all stopped at once when leadership is lost.
//! 3. Each controller (a folder under [`controllers`]) wires informer
//!    handlers to its work queue and runs a reconcile function per key,
//!    with the shared pieces: [`expectations`], [`pod_control`],
//!    [`ownership`] (adoption and release), [`pods`].
//! 4. [`embed`]: how `capstan` and `capstan-apiserver` run it in process.

pub mod config;
pub mod context;
pub mod controllers;
pub mod embed;
pub mod error;
pub mod expectations;
pub mod failpoints;
pub mod history;
pub mod identity;
pub mod intstr;
pub mod manager;
pub mod metrics;
pub mod ownership;
pub mod pod_control;
pub mod pod_events;
pub mod pods;
pub mod scale;
pub mod status;
#[cfg(test)]
pub(crate) mod testkit;

pub use config::{Flags, Settings};
pub use error::{Error, Result};

use capstan_client::connect::{
    config_from_file, config_from_inline, https_transport, Connection, InlineCredentials,
};

/// The user agent's component name.
pub const COMPONENT: &str = "kube-controller-manager";

/// The clients for `settings` from its `--kubeconfig`.
pub async fn connect(settings: &Settings) -> Result<identity::Clients> {
    let path = settings.kubeconfig.as_ref().ok_or_else(|| {
        Error::Invalid(
            "--kubeconfig is required: the API server to manage and the credentials".into(),
        )
    })?;
    let server = config_from_file(path).await?;
    clients(server, settings)
}

/// The clients for a manager inside the API server's process.
pub async fn connect_inline(
    credentials: &InlineCredentials,
    settings: &Settings,
) -> Result<identity::Clients> {
    let server = config_from_inline(credentials).await?;
    clients(server, settings)
}

fn clients(server: kube::Config, settings: &Settings) -> Result<identity::Clients> {
    let root = match settings.watch_delay() {
        None => Connection::from_config(server.clone(), &settings.client(), COMPONENT)?,
        Some((resource, delay)) => {
            tracing::warn!(
                ?resource,
                ?delay,
                "failpoint: watch events reach the caches late"
            );
            let transport = failpoints::delay_watches(https_transport(&server)?, resource, delay);
            let namespace = server.default_namespace.clone();
            Connection::over(transport, namespace, &settings.client(), COMPONENT)?
        }
    };
    Ok(match settings.use_service_account_credentials {
        true => identity::Clients::per_service_account(root, server, settings.client()),
        false => identity::Clients::shared(root),
    })
}
