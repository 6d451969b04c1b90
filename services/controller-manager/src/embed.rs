//! The controller manager inside another process (`capstan`,
//! `capstan-apiserver`), as k3s embeds kube-controller-manager: its own
//! thread and tokio runtime, talking to the API server over loopback HTTPS
//! with a client certificate of its own (`system:kube-controller-manager`),
//! so its writes pass authentication, authorization, admission and audit
//! like any client's. It leader-elects like a separate process: with
//! several API servers, one of them runs the controllers.

use std::thread::JoinHandle;

use capstan_client::connect::InlineCredentials;
use tokio::sync::oneshot;

use crate::config::Settings;

/// A running embedded controller manager. Stopping it (or dropping it)
/// gives up the lease and ends its thread.
pub struct Embedded {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The settings for an embedded manager: kube's defaults, no health port
/// of its own (the API server's process has its own), unless given.
pub fn default_settings() -> Settings {
    Settings {
        secure_port: 0,
        ..Settings::defaults()
    }
}

/// Starts the manager on its own thread, connecting with `credentials`.
pub fn start(credentials: InlineCredentials, settings: Settings) -> std::io::Result<Embedded> {
    spawn(Some(credentials), settings)
}

/// Starts the manager on its own thread, connecting as `settings.kubeconfig` says.
pub fn start_from_kubeconfig(settings: Settings) -> std::io::Result<Embedded> {
    spawn(None, settings)
}

fn spawn(credentials: Option<InlineCredentials>, settings: Settings) -> std::io::Result<Embedded> {
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("controller-manager".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("controller-manager")
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => return tracing::error!(%err, "controller manager runtime"),
            };
            runtime.block_on(async move {
                let result = async {
                    let clients = match &credentials {
                        Some(credentials) => crate::connect_inline(credentials, &settings).await?,
                        None => crate::connect(&settings).await?,
                    };
                    crate::manager::run(settings, clients, async {
                        let _ = stopped.await;
                    })
                    .await
                };
                if let Err(err) = result.await {
                    tracing::error!(%err, "embedded controller manager stopped");
                }
            });
        })?;
    Ok(Embedded {
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl Embedded {
    /// Stops the controllers (giving up the lease) and waits for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.shutdown();
    }
}
