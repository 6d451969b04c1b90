//! The `capstan-apiserver` binary.

use clap::Parser;

use capstan_apiserver::config::{ApiserverConfig, Flags};

// jemalloc, tuned as shared/allocator explains.
capstan_allocator::install!();

fn main() {
    let flags = Flags::parse();
    let config = match ApiserverConfig::load(&flags) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("capstan-apiserver: {err}");
            std::process::exit(2);
        }
    };
    capstan_telemetry::init_logging(&config.log_level);
    let result = actix_rt::System::new().block_on(capstan_apiserver::run(
        config,
        capstan_telemetry::shutdown_signal(),
    ));
    if let Err(err) = result {
        tracing::error!(%err, "capstan-apiserver failed");
        std::process::exit(1);
    }
}
