//! Logging set-up shared by Capstan's binaries.

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
