//! The `capstan-store` binary: one member of the store.

use clap::Parser;

use capstan_store::config::{Flags, StoreConfig};

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
