//! The `capstan-apiserver` binary.

use clap::Parser;

use capstan_apiserver::config::{ApiserverConfig, Flags};

/// mimalloc rather than glibc's malloc: every request allocates (JSON
/// trees, protobuf messages, watch events), and under glibc malloc and
/// free were 17% of the control plane's CPU samples; glibc's per-thread
/// arenas also kept freed memory resident. Built without transparent huge
/// pages (`no_thp`): mimalloc otherwise asks for them on its arenas, and
/// each fresh 2 MB page is zeroed whole on first touch.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
