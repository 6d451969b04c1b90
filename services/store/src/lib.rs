//! `capstan-store`: one member of Capstan's revisioned key-value store.
//!
//! Layers, bottom up — each only uses the ones below it:
//! - [`error`], [`failpoints`], [`metrics`], [`config`], [`tls`]: the
//!   member's errors, fault injection for tests, metrics, settings;
//! - [`storage`]: the durable ordered key-value backend (sled behind a trait);
//! - [`mvcc`]: revisions, the key index, historical reads, compaction;
//! - [`lease`], [`watch`], [`snapshot`]: lease table and clock; watchers fed
//!   by MVCC events; the state machine dumped to and loaded from a file;
//! - [`auth`]: etcd's access control (users, roles, permissions, tokens);
//! - [`membership`]: who this member is, and the member list the state
//!   machine keeps;
//! - [`apply`]: etcd request semantics applied from committed raft entries;
//!   [`backup`]: etcd's snapshot file format, both ways;
//! - [`raft_log`]: the raft log (memory and the `raft.wal` file) and the
//!   threads that make it durable;
//! - [`transport`]: raft messages to and from peers (direct links, gRPC);
//! - [`raft`]: the raft-rs node and the Ready loop that drives it;
//! - [`server`] and [`jobs`]: the etcd v3 gRPC API and the peer port; the
//!   member's background work.

pub mod apply;
pub mod auth;
pub mod backup;
pub mod config;
pub mod error;
pub mod failpoints;
pub mod jobs;
pub mod lease;
pub mod membership;
pub mod metrics;
pub mod mvcc;
pub mod raft;
pub mod raft_log;
pub mod server;
pub mod snapshot;
pub mod storage;
pub mod tls;
pub mod transport;
pub mod watch;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::apply::{restore_leases, Alarms, Applier};
use crate::config::{split_urls, StoreConfig};
use crate::error::{Result, StoreError};
use crate::failpoints::Failpoints;
use crate::lease::Lessor;
use crate::membership::identity::Cluster;
use crate::mvcc::MvccStore;
use crate::raft::{start_node, NodeConfig, NodeParts};
use crate::raft_log::RaftLog;
use crate::server::{Context, Limits, Quota, ServingRuntimes};
use crate::storage::{Backend, SledBackend, WriteBehind};
use crate::transport::GrpcTransport;
use crate::watch::WatchHub;

/// How long open connections may take to close when the member stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How long a client request may wait for raft before it fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(7);

/// Opens the member's state and starts its raft loop and background jobs.
/// The returned context serves requests; see [`run`] for the whole member.
pub fn open(config: &StoreConfig) -> Result<Arc<Context>> {
    let disk = open_disk(config)?;
    let mvcc = disk.mvcc;
    let mut lessor = Lessor::new(config.min_lease_ttl());
    restore_leases(&mvcc, &mut lessor)?;
    let lessor = Arc::new(Mutex::new(lessor));
    let hub = WatchHub::new(mvcc.clone(), config.max_request_bytes as usize);
    hub.start(config.progress_notify_interval());
    let alarms = Arc::new(Alarms::load(&**mvcc.backend())?);
    let auth = Arc::new(auth::AuthStore::open(
        &**mvcc.backend(),
        &auth_settings(config),
    )?);
    let mut metrics = metrics::Metrics::new();
    auth.metrics().register(&mut metrics.registry);
    let cluster = disk.cluster;
    let parts = NodeParts {
        cluster_id: cluster.cluster_id.clone(),
        log: (disk.log).with_state_machine(mvcc.clone(), &snapshot::dir(&config.data_dir)),
        backend: mvcc.backend().clone(),
        applier: Applier::new(
            mvcc.clone(),
            lessor.clone(),
            hub.clone(),
            alarms.clone(),
            auth.clone(),
        ),
        lessor: lessor.clone(),
        transport: Arc::new(GrpcTransport::new(
            cluster.local_id,
            cluster.cluster_id.clone(),
            tokio::runtime::Handle::current(),
        )),
        applied: mvcc.applied_index()?,
    };
    let applied = parts.applied;
    let raft = start_node(node_config(config, &cluster, &metrics), parts)?;
    tracing::info!(
        member = format!("{:x}", cluster.local_id),
        cluster = format!("{:x}", cluster.cluster_id.get()),
        revision = mvcc.current_revision(),
        applied,
        "store member opened"
    );
    let ctx = Arc::new(Context {
        raft,
        mvcc,
        hub,
        lessor,
        cluster,
        limits: Limits {
            max_request_bytes: config.max_request_bytes as usize,
            max_txn_ops: config.max_txn_ops as usize,
            election_timeout: Duration::from_millis(config.election_timeout),
        },
        metrics,
        peers: Default::default(),
        failpoints: disk.failpoints,
        data_dir: config.data_dir.clone(),
        alarms,
        quota: Quota::from_setting(config.quota_backend_bytes),
        auth,
        client_cert_auth: config.tls.client.client_cert_auth,
    });
    spawn_jobs(&ctx, config)?;
    Ok(ctx)
}

/// What a member finds in its data directory, made consistent: a crash's
/// leftovers finished or removed, a new cluster's first state written.
struct Disk {
    cluster: Cluster,
    log: RaftLog,
    mvcc: Arc<MvccStore>,
    failpoints: Option<Arc<Failpoints>>,
}

fn open_disk(config: &StoreConfig) -> Result<Disk> {
    storage::ensure_private_dir(&config.data_dir)?;
    let engine = SledBackend::open(&config.data_dir.join("db"))?;
    let backend: Arc<dyn Backend> = Arc::new(WriteBehind::new(engine)?);
    let cluster = Cluster::bootstrap(config, &*backend)?;
    let failpoints = config
        .experimental_enable_failpoints
        .then(|| Arc::new(Failpoints::default()));
    let mut log = RaftLog::open(&config.data_dir.join("raft.wal"))?;
    if let Some(failpoints) = &failpoints {
        tracing::warn!("failpoints enabled (--experimental-enable-failpoints)");
        log = log.with_failpoints(failpoints.clone());
    }
    log.import_legacy(&*backend)?;
    let new_cluster = !log.is_initialized() && config.initial_cluster_state == "new";
    let mvcc = Arc::new(MvccStore::open(backend)?);
    snapshot::resume_interrupted_install(&mvcc)?;
    snapshot::clean(&snapshot::dir(&config.data_dir))?;
    if new_cluster {
        if !config.restore_snapshot.is_empty() {
            backup::restore(Path::new(&config.restore_snapshot), &mvcc)?;
        }
        bootstrap_new_cluster(&cluster, &log, &mvcc)?;
    }
    Ok(Disk {
        cluster,
        log,
        mvcc,
        failpoints,
    })
}

fn auth_settings(config: &StoreConfig) -> auth::AuthSettings {
    auth::AuthSettings {
        token: config.auth_token.clone(),
        token_ttl: Duration::from_secs(config.auth_token_ttl),
        bcrypt_cost: config.bcrypt_cost,
    }
}

fn node_config(config: &StoreConfig, cluster: &Cluster, metrics: &metrics::Metrics) -> NodeConfig {
    NodeConfig {
        member_id: cluster.local_id,
        tick: config.tick(),
        election_ticks: config.election_ticks(),
        heartbeat_ticks: 1,
        snapshot_count: config.snapshot_count,
        request_timeout: REQUEST_TIMEOUT,
        metrics: metrics.raft.clone(),
        bootstrap_peers: cluster
            .initial_members
            .iter()
            .map(|m| (m.id, m.peer_urls.clone()))
            .collect(),
    }
}

/// The member's background work; see [`jobs`].
fn spawn_jobs(ctx: &Arc<Context>, config: &StoreConfig) -> Result<()> {
    let policy = config
        .compaction_policy()
        .map_err(|err| StoreError::Config(err.to_string()))?;
    tokio::spawn(jobs::run_lease_expiry(ctx.clone()));
    tokio::spawn(jobs::run_auto_compaction(ctx.clone(), policy));
    tokio::spawn(jobs::publish_attributes(ctx.clone()));
    Ok(())
}

/// The state every initial member of a new cluster starts from, identical
/// on each: the initial member records applied at index 1, and a log that
/// begins after index 1 with the initial voters. A member that joins later
/// starts empty and receives all of it in the leader's snapshot.
fn bootstrap_new_cluster(cluster: &Cluster, log: &RaftLog, mvcc: &MvccStore) -> Result<()> {
    membership::records::write_initial_members(&**mvcc.backend(), &cluster.initial_records())?;
    mvcc.write().finish(raft_log::BOOTSTRAP_INDEX)?;
    // The state machine is durable before the log says it is initialised,
    // or a crash in between would leave a log the state machine is behind.
    mvcc.backend().flush()?;
    log.bootstrap(cluster.initial_voter_ids())
}

/// Binds `url`.
async fn listen(url: &str) -> Result<tokio::net::TcpListener> {
    server::bind(url)
        .await
        .map_err(|err| StoreError::Config(format!("listen on {url}: {err}")))
}

/// One serving runtime per core this process may run on (its affinity
/// and cgroup quota counted), as many as etcd's Go runtime would use.
fn serving_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The client and peer servers' TLS, read and checked before anything
/// starts; how peers are dialed (gRPC and direct links) is set for the
/// whole process.
fn tls_configs(
    settings: &tls::TlsSettings,
) -> Result<(
    Option<tonic::transport::ServerTlsConfig>,
    Option<Arc<tokio_rustls::rustls::ServerConfig>>,
)> {
    settings.client.validate("")?;
    settings.peer.validate("peer-")?;
    let client = settings.client.server("")?;
    let peer = settings.peer.link_server("peer-")?;
    tls::set_peer_client(settings.peer.client("peer-")?);
    if settings.peer.enabled() || !settings.peer.trusted_ca_file.is_empty() {
        tls::set_link_client(settings.peer.link_client("peer-")?);
    }
    Ok((client, peer))
}

/// Runs a member until `shutdown` resolves: opens its state, binds every
/// client URL, serves.
pub async fn run(
    config: StoreConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    run_with(config, shutdown, |_| {}).await
}

/// As [`run`], handing `opened` the member's context as soon as its state
/// is open, before anything is served: an embedder makes its in-process
/// client from it ([`server::in_process::channel`]).
pub async fn run_with(
    config: StoreConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opened: impl FnOnce(&Arc<Context>),
) -> Result<()> {
    let (client_tls, peer_tls) = tls_configs(&config.tls)?;
    let ctx = open(&config)?;
    opened(&ctx);
    let runtimes = ServingRuntimes::start(serving_threads(), &ctx.raft)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut servers = Vec::new();
    for url in split_urls(&config.listen_client_urls) {
        let listener = listen(&url).await?;
        tracing::info!(%url, runtimes = runtimes.handles().len(), "serving the etcd v3 API");
        servers.push(tokio::spawn(server::serve(
            ctx.clone(),
            listener,
            client_tls.clone(),
            stop_rx.clone(),
            runtimes.handles().to_vec(),
        )));
    }
    for url in split_urls(&config.listen_peer_urls) {
        let listener = listen(&url).await?;
        tracing::info!(%url, "serving peers");
        servers.push(tokio::spawn(server::serve_peers(
            ctx.clone(),
            listener,
            peer_tls.clone(),
            server::when_stopped(&stop_rx),
        )));
    }
    shutdown.await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    // Graceful shutdown waits for open connections to end, and the peer
    // streams of other members never do: give them a moment, then go.
    let drained = futures::future::join_all(servers);
    if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
        tracing::info!("connections still open after {SHUTDOWN_GRACE:?}; stopping anyway");
    }
    runtimes.stop();
    ctx.mvcc.backend().flush()?;
    Ok(())
}
