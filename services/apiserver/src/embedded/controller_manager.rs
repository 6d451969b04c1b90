//! kube-controller-manager's loops in this process, as
//! `system:kube-controller-manager`, on the Lease
//! `kube-system/kube-controller-manager`.

use std::path::PathBuf;

use capstan_client::informer::Informer;
use capstan_controller_manager::embed::{self, Embedded};
use capstan_controller_manager::Flags as ControllerFlags;
use k8s_openapi::api::core::v1::Pod;

use crate::config::ApiserverConfig;

/// The user the embedded controller manager authenticates as.
pub(super) const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

/// Starts the controller manager unless disabled, with the process's
/// shared pod informer if there is one; None (and a log line saying why)
/// when it is disabled or has no credentials.
pub fn start_controller_manager(
    config: &ApiserverConfig,
    shared_pods: Option<Informer<Pod>>,
) -> Option<Embedded> {
    if config.embedded.disable_controller_manager {
        return None;
    }
    // CAPSTAN_* variables reach it as they reach a separate process.
    let mut settings = match capstan_controller_manager::Settings::load(&ControllerFlags::default())
    {
        Ok(settings) => settings,
        Err(err) => {
            tracing::error!(%err, "controller manager settings; not started");
            return None;
        }
    };
    settings.secure_port = 0;
    settings.root_ca_file = config.root_ca_file.clone();
    let watch_delay = &config.embedded.experimental_controller_watch_delay;
    if !watch_delay.is_empty() {
        settings.experimental_watch_delay = watch_delay.clone();
    }
    let started = match config.embedded.controller_manager_kubeconfig.as_str() {
        "" => super::credentials(config, CONTROLLER_MANAGER, None)
            .map(|c| embed::start(c, settings, shared_pods)),
        file => {
            settings.kubeconfig = Some(PathBuf::from(file));
            Ok(embed::start_from_kubeconfig(settings))
        }
    };
    match started {
        Ok(Ok(embedded)) => Some(embedded),
        Ok(Err(err)) => {
            tracing::error!(%err, "controller manager thread; not started");
            None
        }
        Err(reason) => {
            tracing::warn!(%reason, "no credentials for the in-process controller manager: not started \
                (give --controller-manager-kubeconfig, or run capstan-controller-manager apart)");
            None
        }
    }
}
