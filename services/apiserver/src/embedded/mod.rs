//! The components this API server runs in its own process by default, as
//! k3s does: kube-controller-manager's loops (`capstan-controller-manager`)
//! and kube-scheduler (`capstan-scheduler`). They are ordinary API clients
//! of this server over loopback HTTPS, each with a client certificate of
//! its own (signed in memory with the client CA's key, which the server
//! finds beside `--client-ca-file` as `capstan certificates` and `capstan`
//! lay it out), so their writes pass authentication, RBAC, admission and
//! audit like anyone's. With several API servers each runs them, and
//! leader election lets one of each lead.
//!
//! - `settings.rs`: their flags;
//! - `credentials.rs`: the loopback address, the CA, a client certificate;
//! - `controller_manager.rs`, `scheduler.rs`: one file per component;
//! - `shared_pods.rs`: the pod informer both share when both run here.

mod controller_manager;
mod credentials;
mod scheduler;
pub mod settings;
mod shared_pods;

pub use credentials::credentials;

use shared_pods::SharedPods;

/// The components running in this process.
pub struct Running {
    controller_manager: Option<capstan_controller_manager::embed::Embedded>,
    scheduler: Option<capstan_scheduler::embed::Embedded>,
    shared_pods: Option<SharedPods>,
}

/// Starts every component the settings do not disable (each logs why
/// when it cannot start).
pub fn start(config: &crate::config::ApiserverConfig) -> Running {
    let shared_pods = start_shared_pods(config);
    let pods = shared_pods.as_ref().map(|shared| shared.pods.clone());
    Running {
        controller_manager: controller_manager::start_controller_manager(config, pods.clone()),
        scheduler: scheduler::start_scheduler(config, pods),
        shared_pods,
    }
}

/// The shared pod informer, when both components run here with this
/// process's credentials and as they are (a test's watch delay gives the
/// manager lagging watches of its own).
fn start_shared_pods(config: &crate::config::ApiserverConfig) -> Option<SharedPods> {
    let settings = &config.embedded;
    let both_inline = !settings.disable_controller_manager
        && settings.controller_manager_kubeconfig.is_empty()
        && settings.experimental_controller_watch_delay.is_empty()
        && settings.scheduler.is_some()
        && !settings.disable_scheduler
        && settings.scheduler_kubeconfig.is_empty();
    if !both_inline {
        return None;
    }
    let credentials = credentials(config, controller_manager::CONTROLLER_MANAGER, None).ok()?;
    SharedPods::start(credentials)
}

impl Running {
    /// Stops them (each gives its Lease up) and waits for their threads.
    /// Blocks: call it off the server's event loop.
    pub fn stop(self) {
        if let Some(scheduler) = self.scheduler {
            scheduler.stop();
        }
        if let Some(controller_manager) = self.controller_manager {
            controller_manager.stop();
        }
        if let Some(shared_pods) = self.shared_pods {
            shared_pods.stop();
        }
    }
}
