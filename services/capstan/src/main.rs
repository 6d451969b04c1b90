//! `capstan`: one store member (a single-member raft group) and one API
//! server in one process, data under `--data-dir`, and a kubeconfig
//! beside it. The store runs on a tokio runtime, the API server in its own
//! actix system thread; both stop on SIGINT/SIGTERM.

mod kubeconfig;

use std::path::PathBuf;

use clap::Parser;
use tokio::sync::oneshot;

use capstan_apiserver::config::{ApiserverConfig, Flags as ApiFlags};
use capstan_store::config::{Flags as StoreFlags, StoreConfig};

#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version,
    about = "A Kubernetes-style control plane in one process"
)]
struct Flags {
    /// Folder for the store's data and the kubeconfig.
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// Port of the Kubernetes API (on 127.0.0.1).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Client port of the embedded store (etcd v3 API, on 127.0.0.1).
    #[arg(long, default_value_t = 2379)]
    store_port: u16,
    /// Peer port of the embedded store.
    #[arg(long, default_value_t = 2380)]
    peer_port: u16,
    #[arg(long, default_value = "info")]
    log_level: String,
}

fn main() {
    let flags = Flags::parse();
    capstan_telemetry::init_logging(&flags.log_level);
    if let Err(err) = run(flags) {
        eprintln!("capstan: {err}");
        std::process::exit(1);
    }
}

fn run(flags: Flags) -> Result<(), Box<dyn std::error::Error>> {
    let store_url = format!("http://127.0.0.1:{}", flags.store_port);
    let store = StoreConfig::load(&StoreFlags {
        name: Some("capstan".into()),
        data_dir: Some(flags.data_dir.join("store")),
        listen_client_urls: Some(store_url.clone()),
        listen_peer_urls: Some(format!("http://127.0.0.1:{}", flags.peer_port)),
        log_level: Some(flags.log_level.clone()),
        ..Default::default()
    })?;
    let api = ApiserverConfig::load(&ApiFlags {
        etcd_servers: Some(store_url),
        bind_address: Some("127.0.0.1".into()),
        port: Some(flags.port),
        ..Default::default()
    })?;
    let path = kubeconfig::write(&flags.data_dir, &format!("http://127.0.0.1:{}", flags.port))?;
    tracing::info!(kubeconfig = %path.display(), "try: kubectl --kubeconfig {} get ns", path.display());

    let runtime = tokio::runtime::Runtime::new()?;
    let (stop_store, store_stopped) = oneshot::channel::<()>();
    let store_task = runtime.spawn(capstan_store::run(store, async {
        let _ = store_stopped.await;
    }));
    let (stop_api, api_stopped) = oneshot::channel::<()>();
    let api_thread = std::thread::spawn(move || {
        actix_rt::System::new().block_on(capstan_apiserver::run(api, async {
            let _ = api_stopped.await;
        }))
    });
    runtime.block_on(shutdown_signal_or(&api_thread));
    let _ = stop_api.send(());
    let api_result = api_thread
        .join()
        .map_err(|_| "the API server thread panicked")?;
    let _ = stop_store.send(());
    runtime.block_on(store_task)??;
    api_result?;
    Ok(())
}

/// Waits for SIGINT/SIGTERM, or for the API server to stop by itself
/// (it could not start, for example).
async fn shutdown_signal_or(
    api: &std::thread::JoinHandle<Result<(), capstan_apiserver::StartError>>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    let shutdown = capstan_telemetry::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tick.tick() => if api.is_finished() { return },
        }
    }
}
