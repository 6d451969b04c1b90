//! The `capstan-store` binary: one member of the store.

use clap::Parser;

use capstan_store::config::{Flags, StoreConfig};

/// Every request allocates (gRPC frames, protobuf messages, raft entries);
/// under glibc's malloc that was about 15% of the store's CPU per put.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
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
