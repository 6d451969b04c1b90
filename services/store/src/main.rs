//! The `capstan-store` binary: one member of the store.

use clap::Parser;

use capstan_store::config::{Flags, StoreConfig};

/// Every request allocates (gRPC frames, protobuf messages, raft entries);
/// under glibc's malloc that was about 15% of the store's CPU per put.
/// Built without transparent huge pages (`no_thp`): mimalloc otherwise
/// asks for them on its arenas, and each fresh 2 MB page is zeroed whole
/// on first touch: 6% of the store's CPU samples at 256 putting clients,
/// 0.5% with 4 KB pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
