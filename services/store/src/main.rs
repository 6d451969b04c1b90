//! The `capstan-store` binary: one member of the store.

use clap::Parser;

use capstan_store::config::{Flags, StoreConfig};

// jemalloc, tuned as shared/allocator explains.
capstan_allocator::install!();

/// The main runtime accepts client connections and hands them to the
/// serving runtimes (one current-thread runtime per core, see
/// `server/serving.rs`), and runs the peer port and the background jobs.
/// On one thread the tasks woken by a batch of answers run in order, the
/// requests' first, so a connection writes all its ready responses at once;
/// with the work-stealing runtime a task woken by another ran next on that
/// thread, a `writev` (and the loopback's whole TCP path) per response.
/// Raft, the log sync and the state writer have threads of their own.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = Flags::parse();
    let config = match StoreConfig::load(&flags) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("capstan-store: {err}");
            std::process::exit(2);
        }
    };
    capstan_telemetry::init_logging(&config.log_level);
    if let Err(err) = capstan_store::run(config, capstan_telemetry::shutdown_signal()).await {
        tracing::error!(%err, "capstan-store failed");
        std::process::exit(1);
    }
}
