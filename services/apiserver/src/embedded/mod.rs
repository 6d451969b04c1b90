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
//! - `controller_manager.rs`, `scheduler.rs`: one file per component.

mod controller_manager;
mod credentials;
mod scheduler;
pub mod settings;

pub use credentials::credentials;

/// The components running in this process.
pub struct Running {
    controller_manager: Option<capstan_controller_manager::embed::Embedded>,
    scheduler: Option<capstan_scheduler::embed::Embedded>,
}

/// Starts every component the settings do not disable (each logs why
/// when it cannot start).
pub fn start(config: &crate::config::ApiserverConfig) -> Running {
    Running {
        controller_manager: controller_manager::start_controller_manager(config),
        scheduler: scheduler::start_scheduler(config),
    }
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
    }
}
