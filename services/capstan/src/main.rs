//! `capstan`: one store member (a single-member raft group) and one API
//! server in one process, data under `--data-dir`. On first start it makes
//! the cluster's certificates and keys under `<data-dir>/pki` (as k3s
//! does) and writes `<data-dir>/kubeconfig` with the admin's credentials;
//! later starts reuse them. The embedded store speaks TLS on loopback
//! with a CA of its own (`<data-dir>/pki/etcd`), as k3s's etcd does, for
//! etcdctl and other clients; the API server reaches it in process, with
//! the identity of its store client certificate, without a socket.
//! The API server runs kube-scheduler in its process, and `capstan`
//! runs simulated nodes (`--simulated-nodes`, default 1), so pods run.
//! Secrets are encrypted at rest with a key generated on first start
//! (`<data-dir>/pki/encryption-config.yaml`). The store runs on a tokio runtime, the API
//! server in its own actix system thread; both stop on SIGINT/SIGTERM.

mod certificates;
mod encryption;
mod kubeconfig;
mod nodes;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio::sync::oneshot;

use capstan_apiserver::aggregator::settings::AggregatorFlags;
use capstan_apiserver::config::{ApiserverConfig, Flags as ApiFlags};
use capstan_apiserver::kubelet_client::settings::KubeletFlags;
use capstan_apiserver::pki::{self, Pki, PkiError};
use capstan_apiserver::storage::{InProcessStore, StoreChannel};
use capstan_store::config::{Flags as StoreFlags, StoreConfig};
use capstan_store::server::in_process;
use capstan_store::tls::TlsFlags;

#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version,
    about = "A Kubernetes-style control plane in one process",
    args_conflicts_with_subcommands = true
)]
struct CapstanFlags {
    #[command(subcommand)]
    command: Option<Command>,
    /// Folder for the store's data, the certificates and the kubeconfig.
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// Client port of the embedded store (etcd v3 API, on 127.0.0.1).
    #[arg(long, default_value_t = 2379)]
    store_port: u16,
    /// Peer port of the embedded store.
    #[arg(long, default_value_t = 2380)]
    peer_port: u16,
    /// Extra names (DNS names or IP addresses) for the serving certificate,
    /// besides 127.0.0.1, localhost and the host name; used when the
    /// certificate is first made.
    #[arg(long, value_delimiter = ',')]
    tls_san: Vec<String>,
    /// The API server's flags (kube-apiserver's names), passed on; the
    /// certificate and key flags default to the files under `pki/`.
    #[command(flatten)]
    api: ApiFlags,
    #[command(flatten)]
    nodes: nodes::SimulatedNodeFlags,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Makes the certificates, keys and admin kubeconfig of a control
    /// plane of several processes into one folder (kept if they exist).
    Certificates(certificates::CertificatesFlags),
}

// jemalloc, tuned as shared/allocator explains. The feature
// `system-allocator` keeps glibc's, for heap profilers that hook malloc
// (`heaptrack`).
#[cfg(not(feature = "system-allocator"))]
capstan_allocator::install!();

fn main() {
    let flags = CapstanFlags::parse();
    if let Some(Command::Certificates(certificates)) = &flags.command {
        match certificates::generate(certificates) {
            Ok(kubeconfig) => println!("wrote {}", kubeconfig.display()),
            Err(err) => {
                eprintln!("capstan certificates: {err}");
                std::process::exit(1);
            }
        }
        return;
    }
    capstan_telemetry::init_logging(flags.api.log_level.as_deref().unwrap_or("info"));
    if let Err(err) = run(flags) {
        eprintln!("capstan: {err}");
        std::process::exit(1);
    }
}

/// The API server's flags: what was given, else the embedded defaults
/// (the local store, loopback, the generated certificates and keys, the
/// generated encryption configuration).
fn api_flags(
    flags: &CapstanFlags,
    pki: &Pki,
    store_url: &str,
    encryption: Option<PathBuf>,
) -> ApiFlags {
    let path = |p: PathBuf| Some(p.display().to_string());
    let given = flags.api.clone();
    ApiFlags {
        encryption_provider_config: given
            .encryption_provider_config
            .or(encryption.and_then(path)),
        etcd_servers: Some(store_url.to_string()),
        etcd_cafile: given.etcd_cafile.or(path(pki.store_ca())),
        etcd_certfile: given.etcd_certfile.or(path(pki.store_client_cert())),
        etcd_keyfile: given.etcd_keyfile.or(path(pki.store_client_key())),
        bind_address: given.bind_address.or(Some("127.0.0.1".into())),
        tls_cert_file: given.tls_cert_file.or(path(pki.serving_cert())),
        tls_private_key_file: given.tls_private_key_file.or(path(pki.serving_key())),
        client_ca_file: given.client_ca_file.or(path(pki.client_ca())),
        service_account_signing_key_file: given
            .service_account_signing_key_file
            .or(path(pki.service_account_key())),
        service_account_key_file: given
            .service_account_key_file
            .or(path(pki.service_account_key())),
        root_ca_file: given.root_ca_file.or(path(pki.server_ca())),
        aggregator: front_proxy_flags(given.aggregator.clone(), pki),
        kubelet: kubelet_flags(given.kubelet.clone(), pki),
        ..given
    }
}

/// The aggregator's flags: kubeadm's, over the generated front-proxy CA
/// and client certificate, unless given.
fn front_proxy_flags(given: AggregatorFlags, pki: &Pki) -> AggregatorFlags {
    let path = |p: PathBuf| Some(p.display().to_string());
    let named = |name: &str| Some(name.to_string());
    AggregatorFlags {
        proxy_client_cert_file: given
            .proxy_client_cert_file
            .or(path(pki.front_proxy_client_cert())),
        proxy_client_key_file: given
            .proxy_client_key_file
            .or(path(pki.front_proxy_client_key())),
        requestheader_client_ca_file: given
            .requestheader_client_ca_file
            .or(path(pki.front_proxy_ca())),
        requestheader_username_headers: given
            .requestheader_username_headers
            .or(named("X-Remote-User")),
        requestheader_group_headers: given
            .requestheader_group_headers
            .or(named("X-Remote-Group")),
        requestheader_extra_headers_prefix: given
            .requestheader_extra_headers_prefix
            .or(named("X-Remote-Extra-")),
        requestheader_allowed_names: given
            .requestheader_allowed_names
            .or(named(pki::FRONT_PROXY_CLIENT)),
        ..given
    }
}

/// The kubelet client's flags: the generated kubelet client certificate
/// (bound to `system:kubelet-api-admin`), unless given.
fn kubelet_flags(given: KubeletFlags, pki: &Pki) -> KubeletFlags {
    let path = |p: PathBuf| Some(p.display().to_string());
    KubeletFlags {
        kubelet_client_certificate: given
            .kubelet_client_certificate
            .or(path(pki.kubelet_client_cert())),
        kubelet_client_key: given.kubelet_client_key.or(path(pki.kubelet_client_key())),
        ..given
    }
}

/// The embedded store's name, and its certificate's file names.
const STORE_MEMBER: &str = "capstan";

/// The embedded store's flags: one member on loopback, over TLS with the
/// store's own CA, clients and the peer port both requiring a
/// certificate from it.
fn store_flags(flags: &CapstanFlags, pki: &Pki, log_level: String) -> StoreFlags {
    let path = |p: PathBuf| Some(p.display().to_string());
    let cert = path(pki.store_member_cert(STORE_MEMBER));
    let key = path(pki.store_member_key(STORE_MEMBER));
    let ca = path(pki.store_ca());
    StoreFlags {
        name: Some(STORE_MEMBER.into()),
        data_dir: Some(flags.data_dir.join("store")),
        listen_client_urls: Some(format!("https://127.0.0.1:{}", flags.store_port)),
        listen_peer_urls: Some(format!("https://127.0.0.1:{}", flags.peer_port)),
        log_level: Some(log_level),
        tls: TlsFlags {
            cert_file: cert.clone(),
            key_file: key.clone(),
            trusted_ca_file: ca.clone(),
            client_cert_auth: Some(true),
            peer_cert_file: cert,
            peer_key_file: key,
            peer_trusted_ca_file: ca,
            peer_client_cert_auth: Some(true),
        },
        ..Default::default()
    }
}

/// Makes (on first start) the API server's and the store's certificates.
fn ensure_pki(flags: &CapstanFlags) -> Result<Pki, PkiError> {
    let pki = Pki::at(&flags.data_dir.join("pki"));
    pki.ensure(&pki::serving_names(&flags.tls_san))?;
    let loopback = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    pki.ensure_store(&[(STORE_MEMBER.to_string(), loopback)])?;
    Ok(pki)
}

fn run(flags: CapstanFlags) -> Result<(), Box<dyn std::error::Error>> {
    let log_level = flags.api.log_level.clone().unwrap_or_else(|| "info".into());
    let pki = ensure_pki(&flags)?;
    let store = StoreConfig::load(&store_flags(&flags, &pki, log_level))?;
    let store_url = format!("https://127.0.0.1:{}", flags.store_port);
    // Secrets are encrypted at rest unless the user brings a configuration.
    let encryption = match flags.api.encryption_provider_config {
        Some(_) => None,
        None => Some(encryption::ensure(&flags.data_dir.join("pki"))?),
    };
    let api = ApiserverConfig::load(&api_flags(&flags, &pki, &store_url, encryption))?;
    let server = match api.secure_port {
        0 => format!("http://127.0.0.1:{}", api.insecure_port),
        port => format!("https://127.0.0.1:{port}"),
    };
    let path = kubeconfig::write(&flags.data_dir, &server, &pki)?;
    tracing::info!(kubeconfig = %path.display(), "try: kubectl --kubeconfig {} get ns", path.display());
    let simulated_nodes = flags.nodes.settings(&pki)?;

    let runtime = tokio::runtime::Runtime::new()?;
    let (stop_store, store_stopped) = oneshot::channel::<()>();
    let identity = api.etcd_certfile.clone();
    let (opened, store_opened) = oneshot::channel();
    let store_task = runtime.spawn(capstan_store::run_with(
        store,
        async {
            let _ = store_stopped.await;
        },
        move |member| {
            let _ = opened.send(in_process::client_presenting(member, &identity));
        },
    ));
    let store = match runtime.block_on(store_opened) {
        Ok(opened) => {
            let (channel, kv) = opened?;
            InProcessStore {
                channel: StoreChannel::Custom(channel),
                kv,
            }
        }
        Err(_) => {
            runtime.block_on(store_task)??;
            return Err("the store stopped before it opened".into());
        }
    };
    let (stop_api, api_stopped) = oneshot::channel::<()>();
    let api_thread = std::thread::spawn(move || {
        let stopped = async {
            let _ = api_stopped.await;
        };
        let api = capstan_apiserver::run_with_store(api, Some(store), stopped);
        actix_rt::System::new().block_on(api)
    });
    let (stop_nodes, nodes_stopped) = oneshot::channel::<()>();
    let nodes_task = simulated_nodes.map(|settings| {
        runtime.spawn(nodes::run(settings, pki, server, path, async {
            let _ = nodes_stopped.await;
        }))
    });
    runtime.block_on(shutdown_signal_or(&api_thread));
    // The nodes first: they stop their loops while the API still answers.
    let _ = stop_nodes.send(());
    if let Some(task) = nodes_task {
        let _ = runtime.block_on(tokio::time::timeout(Duration::from_secs(5), task));
    }
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
