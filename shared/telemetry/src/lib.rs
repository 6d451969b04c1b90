//! Process plumbing shared by Capstan's binaries: logging, configuration
//! layering and the shutdown signal.

pub mod settings;

use std::io::IsTerminal;

use tracing_subscriber::{fmt, EnvFilter};

/// Installs a `tracing` subscriber that writes to stderr.
///
/// `RUST_LOG` wins over `default_level` so an operator can turn up one module
/// without a restart flag.
pub fn init_logging(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let _ = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        .try_init();
}

/// Resolves on Ctrl-C or SIGTERM, the signals an operator or an init system
/// sends to stop a server gracefully.
pub async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
