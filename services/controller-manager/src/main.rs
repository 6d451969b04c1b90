//! `capstan-controller-manager --kubeconfig F`: the controllers apart from
//! the API server, as kube-controller-manager runs.

use clap::Parser;

use capstan_controller_manager::{connect, manager, Flags, Settings};

// jemalloc, tuned as shared/allocator explains.
capstan_allocator::install!();

fn main() {
    let flags = Flags::parse();
    let settings = match Settings::load(&flags) {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("capstan-controller-manager: {err}");
            std::process::exit(2);
        }
    };
    capstan_telemetry::init_logging(&settings.log_level);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("capstan-controller-manager: {err}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        let clients = connect(&settings).await?;
        manager::run(
            settings,
            clients,
            None,
            capstan_telemetry::shutdown_signal(),
        )
        .await
    });
    if let Err(err) = result {
        eprintln!("capstan-controller-manager: {err}");
        std::process::exit(1);
    }
}
