//! The scheduler inside another process (`capstan`, `capstan-apiserver`),
//! as k3s embeds kube-scheduler: its own thread and tokio runtime, talking
//! to the API server over loopback HTTPS with a client certificate of its
//! own (`system:kube-scheduler`), so its bindings pass authentication,
//! authorization, admission and audit like any client's. It leader-elects
//! like a separate process: with several API servers, one schedules; one
//! that loses the Lease goes back to waiting for it (a separate
//! `capstan-scheduler` exits instead, and is restarted by its supervisor).

use std::path::Path;
use std::time::Duration;

use capstan_client::connect::{ClientSettings, Connection, InlineCredentials};
use capstan_client::embed::CancellationToken;
pub use capstan_client::embed::Embedded;
use capstan_client::informer::Informer;
use k8s_openapi::api::core::v1::Pod;

use crate::config::{self, FieldError, SchedulerConfig};
use crate::core::profiles::Profiles;
use crate::framework::StaticLister;
use crate::wiring::RunError;

/// How the embedded scheduler reaches the API.
pub enum Credentials {
    /// Inline parts from the process it runs in.
    Inline(InlineCredentials),
    /// A kubeconfig file.
    Kubeconfig(String),
}

/// The configuration file at `path` (kube's defaults without one), with
/// every profile built once so that a bad plugin or plugin argument
/// stops start-up too; the error names the file and the field.
pub fn load_config(path: Option<&Path>) -> Result<SchedulerConfig, String> {
    let config = match path {
        Some(path) => config::load(path).map_err(|e| e.to_string())?,
        None => SchedulerConfig::default(),
    };
    let lister = std::sync::Arc::new(StaticLister::default());
    if let Err(FieldError { field, message }) = Profiles::build(&config, lister) {
        let file = path.map_or("defaults".into(), |p| p.display().to_string());
        return Err(format!("{file}: {field}: {message}"));
    }
    Ok(config)
}

/// Starts the scheduler on its own thread; with `shared_pods` it uses
/// that pod informer of the host process rather than watching pods
/// itself. Stopping it (or dropping it) gives up the Lease and ends the
/// thread.
pub fn start(
    credentials: Credentials,
    config: SchedulerConfig,
    shared_pods: Option<Informer<Pod>>,
) -> std::io::Result<Embedded> {
    Embedded::start("scheduler", move |stop| {
        run(credentials, config, shared_pods, stop)
    })
}

/// Connects, then schedules while it holds the Lease, until stopped.
async fn run(
    credentials: Credentials,
    config: SchedulerConfig,
    shared_pods: Option<Informer<Pod>>,
    stop: CancellationToken,
) {
    let settings = ClientSettings {
        kubeconfig: None,
        kube_api_qps: config.qps,
        kube_api_burst: config.burst.max(0) as u32,
    };
    let connected = match &credentials {
        Credentials::Inline(inline) => {
            Connection::from_inline(inline, &settings, "kube-scheduler").await
        }
        Credentials::Kubeconfig(file) => {
            let settings = ClientSettings {
                kubeconfig: Some(file.into()),
                ..settings
            };
            Connection::from_settings(&settings, "kube-scheduler").await
        }
    };
    let connection = match connected {
        Ok(connection) => connection,
        Err(err) => return tracing::error!(%err, "embedded scheduler: cannot connect; not started"),
    };
    loop {
        let shutdown = stop.clone().cancelled_owned();
        match crate::wiring::run(
            config.clone(),
            connection.client(),
            None,
            shared_pods.clone(),
            shutdown,
        )
        .await
        {
            Ok(()) => return,
            Err(RunError::LeadershipLost) => {
                tracing::warn!("embedded scheduler lost its Lease; waiting to lead again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(err) => return tracing::error!(%err, "embedded scheduler stopped"),
        }
        if stop.is_cancelled() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_plugin_argument_is_named_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scheduler.yaml");
        std::fs::write(
            &path,
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    \
             args:\n      scoringStrategy:\n        type: Fastest\n",
        )
        .unwrap();
        let error = load_config(Some(&path)).unwrap_err();
        assert!(
            error.starts_with(&format!("{}: profiles[0].pluginConfig[0]", path.display())),
            "{error}"
        );
        assert!(error.contains("Fastest"), "{error}");
    }

    #[test]
    fn no_file_is_kubes_defaults() {
        let config = load_config(None).unwrap();
        assert_eq!(config.profiles[0].scheduler_name, "default-scheduler");
    }
}
