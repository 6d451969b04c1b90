//! One informer on every pod, lent to the in-process controller manager
//! and scheduler so the process keeps one cache of every pod rather than
//! two (with 30,000 pods each copy is some 250-300 MB). It runs on a
//! thread and runtime of its own, because the two components' lives
//! differ: the manager makes fresh informers each leadership term, the
//! scheduler warms its caches before it leads; the lent informer outlives
//! both, and each drops its own handlers when its factory stops.
//!
//! It watches as `system:kube-controller-manager`, with the manager's
//! cache transform (the scheduler reads a subset of what the manager
//! keeps).

use std::sync::mpsc;

use capstan_client::connect::{ClientSettings, Connection, InlineCredentials};
use capstan_client::embed::Embedded;
use capstan_client::informer::{strip_pod_runtime_details, Informer, Informers};
use k8s_openapi::api::core::v1::Pod;

/// The running informer and its thread.
pub struct SharedPods {
    pub pods: Informer<Pod>,
    thread: Embedded,
}

impl SharedPods {
    /// Starts the informer with `credentials`; None (logged) if its
    /// thread or connection cannot be made.
    pub fn start(credentials: InlineCredentials) -> Option<SharedPods> {
        let (sender, receiver) = mpsc::channel();
        let started = Embedded::start("shared-pods", move |stop| async move {
            let settings = ClientSettings {
                kubeconfig: None,
                ..ClientSettings::default()
            };
            let connection =
                match Connection::from_inline(&credentials, &settings, "kube-controller-manager")
                    .await
                {
                    Ok(connection) => connection,
                    Err(err) => return tracing::error!(%err, "shared pod informer: cannot connect"),
                };
            let informers = Informers::new(connection.client());
            informers.set_transform::<Pod>(strip_pod_runtime_details);
            // Made here so that its watch runs on this thread's runtime.
            let _ = sender.send(informers.get::<Pod>());
            stop.cancelled().await;
            informers.shutdown();
        });
        let thread = match started {
            Ok(thread) => thread,
            Err(err) => {
                tracing::error!(%err, "shared pod informer thread; each component watches pods itself");
                return None;
            }
        };
        // The sender is dropped without sending if connecting failed.
        let pods = receiver.recv().ok()?;
        Some(SharedPods { pods, thread })
    }

    /// Stops the watch; call it after the components that borrowed it.
    pub fn stop(self) {
        self.thread.stop();
    }
}
