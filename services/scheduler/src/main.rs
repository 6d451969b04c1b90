//! `capstan-scheduler`: kube-scheduler's default profile against any
//! conformant API server (`--kubeconfig`), configured by a
//! KubeSchedulerConfiguration file (`--config`).

use clap::Parser;

use capstan_client::connect::{ClientSettings, Connection};
use capstan_client::health::{self, Health};
use capstan_scheduler::config::FieldError;
use capstan_scheduler::framework::StaticLister;
use capstan_scheduler::options::{Flags, Options};

// jemalloc, tuned as shared/allocator explains.
capstan_allocator::install!();

fn main() {
    let options = Options::load(&Flags::parse()).unwrap_or_else(|e| fail(&e.to_string(), 2));
    capstan_telemetry::init_logging(&options.log_level);
    let config = options
        .scheduler_config()
        .unwrap_or_else(|e| fail(&e.to_string(), 2));
    // Refuse a profile that does not build (unknown plugin, bad plugin args) before connecting.
    if let Err(FieldError { field, message }) = capstan_scheduler::core::profiles::Profiles::build(
        &config,
        std::sync::Arc::new(StaticLister::default()),
    ) {
        let file = options
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "defaults".into());
        fail(&format!("{file}: {field}: {message}"), 2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let result = runtime.block_on(async move {
        let settings = ClientSettings {
            kubeconfig: config.kubeconfig.clone().map(Into::into),
            kube_api_qps: config.qps,
            kube_api_burst: config.burst.max(0) as u32,
        };
        let connection = Connection::from_settings(&settings, "kube-scheduler")
            .await
            .map_err(|e| e.to_string())?;
        let listener =
            tokio::net::TcpListener::bind((options.bind_address.as_str(), options.secure_port))
                .await
                .map_err(|e| format!("--secure-port {}: {e}", options.secure_port))?;
        let health = Health::new();
        tokio::spawn(health::serve(
            listener,
            health.clone(),
            capstan_telemetry::shutdown_signal(),
        ));
        capstan_scheduler::wiring::run(
            config,
            connection.client(),
            Some(health),
            None,
            capstan_telemetry::shutdown_signal(),
        )
        .await
        .map_err(|e| e.to_string())
    });
    if let Err(error) = result {
        fail(&error, 1);
    }
}

fn fail(message: &str, code: i32) -> ! {
    eprintln!("capstan-scheduler: {message}");
    std::process::exit(code);
}
