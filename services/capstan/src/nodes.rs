//! Simulated nodes inside `capstan` (capstan-nodes's role, kwok's role):
//! `--simulated-nodes N` nodes register, renew their Leases and run the
//! pods bound to them, so that `kubectl create deployment` ends in
//! Running pods on a laptop; `--simulated-nodes 0` leaves the cluster to
//! real kubelets or a `capstan-nodes` process.
//!
//! The nodes reach the API as any kubelet does, over loopback HTTPS: the
//! process as `system:capstan-nodes` in `system:nodes` (a client
//! certificate signed with the client CA's key; its rights are the
//! bootstrap ClusterRole of that name and the nodes'), every write as `system:node:<name>` in `system:nodes` through
//! impersonation, which this module allows for exactly these nodes' users.

use std::path::Path;
use std::time::Duration;

use capstan_apiserver::auth::NODES_GROUP;
use capstan_apiserver::pki::Pki;
use capstan_client::connect::{ClientSettings, Connection, InlineCredentials};
use capstan_nodes::config::{Flags as NodesFlags, NodesConfig};
use capstan_nodes::impersonation::{self, SIMULATOR_USER as NODE_SIMULATOR_USER};
use capstan_nodes::settings::Settings;
use time::OffsetDateTime;

/// The ClusterRole (and binding) that lets this process impersonate its nodes.
const IMPERSONATION_ROLE: &str = "capstan:simulated-nodes:impersonate";

#[derive(Debug, Clone, clap::Args)]
pub struct SimulatedNodeFlags {
    /// Simulated nodes run in this process (Node, Lease heartbeats, the
    /// pods bound to them); 0 leaves room for real kubelets.
    #[arg(long, default_value_t = 1)]
    pub simulated_nodes: usize,
    /// Their names: this prefix and a number from 0.
    #[arg(long, default_value = "capstan-simulated-")]
    pub simulated_node_name_prefix: String,
    /// CPUs per simulated node (a quantity; capstan-nodes's default 32).
    #[arg(long)]
    pub simulated_node_cpu: Option<String>,
    /// Memory per simulated node (a quantity; default 256Gi).
    #[arg(long)]
    pub simulated_node_memory: Option<String>,
    /// Pods per simulated node (default 110).
    #[arg(long)]
    pub simulated_node_pods: Option<String>,
    /// Zones the simulated nodes are spread over: `zone-a,zone-b`.
    #[arg(long)]
    pub simulated_node_zones: Option<String>,
    /// Labels every simulated node gets: `key=value,...`.
    #[arg(long)]
    pub simulated_node_labels: Option<String>,
    /// Taints every simulated node registers with: `key=value:Effect,...`.
    #[arg(long)]
    pub simulated_node_taints: Option<String>,
    /// Port of the simulated nodes' health and admin endpoint on
    /// 127.0.0.1 (stop and start nodes there; 0: any free port).
    #[arg(long, default_value_t = 0)]
    pub simulated_nodes_healthz_port: u16,
}

impl SimulatedNodeFlags {
    /// capstan-nodes's settings for these flags (its defaults otherwise,
    /// and `CAPSTAN_*` variables as for a separate process); None for 0 nodes.
    pub fn settings(&self, pki: &Pki) -> Result<Option<Settings>, String> {
        if self.simulated_nodes == 0 {
            return Ok(None);
        }
        let flags = NodesFlags {
            nodes: Some(self.simulated_nodes),
            name_prefix: Some(self.simulated_node_name_prefix.clone()),
            cpu: self.simulated_node_cpu.clone(),
            memory: self.simulated_node_memory.clone(),
            pods: self.simulated_node_pods.clone(),
            zones: self.simulated_node_zones.clone(),
            labels: self.simulated_node_labels.clone(),
            taints: self.simulated_node_taints.clone(),
            kubelet_port: Some(0),
            healthz_port: Some(self.simulated_nodes_healthz_port),
            client_ca_file: Some(pki.client_ca()),
            ..NodesFlags::default()
        };
        let config = NodesConfig::load(&flags).map_err(|e| format!("simulated nodes: {e}"))?;
        Settings::parse(&config)
            .map(Some)
            .map_err(|e| format!("simulated nodes: {e}"))
    }
}

/// Runs the nodes until `shutdown` resolves: first allows this process
/// to impersonate them (as the admin of `admin_kubeconfig`), then runs
/// them as `system:capstan-nodes` against `server`.
pub async fn run(
    settings: Settings,
    pki: Pki,
    server: String,
    admin_kubeconfig: std::path::PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let names: Vec<String> = (0..settings.nodes)
        .map(|i| format!("{}{i}", settings.template.name_prefix))
        .collect();
    if let Err(err) = allow_impersonation(&admin_kubeconfig, &names).await {
        return tracing::error!(%err, "simulated nodes: cannot grant their impersonation; not started");
    }
    let connection = match connect(&pki, &server, &settings.client).await {
        Ok(connection) => connection,
        Err(err) => return tracing::error!(%err, "simulated nodes: cannot connect; not started"),
    };
    tracing::info!(nodes = names.len(), first = %names[0], "simulated nodes starting");
    if let Err(err) = capstan_nodes::run(settings, connection, shutdown).await {
        tracing::error!(%err, "simulated nodes stopped");
    }
}

async fn connect(pki: &Pki, server: &str, client: &ClientSettings) -> Result<Connection, String> {
    let (cert_pem, key_pem) = issue_identity(pki)?;
    let credentials = InlineCredentials {
        server: server.to_string(),
        ca_pem: read(&pki.server_ca())?,
        cert_pem,
        key_pem,
    };
    Connection::from_inline(&credentials, client, "capstan-nodes")
        .await
        .map_err(|e| e.to_string())
}

/// A client certificate and key (PEM) for the simulated nodes' process:
/// `system:capstan-nodes` in `system:nodes`, signed with the client CA's
/// key. In `system:nodes`, so that the process's own watches of its
/// nodes' pods are node traffic to API Priority and Fairness (kube's
/// `system-nodes` FlowSchema), as each kubelet's are.
pub fn issue_identity(pki: &Pki) -> Result<(String, String), String> {
    let authority = pki.client_authority().map_err(|e| e.to_string())?;
    // Valid from an hour ago: clocks of the processes may differ a little.
    let issued = authority
        .issue_client(
            NODE_SIMULATOR_USER,
            Some(NODES_GROUP),
            OffsetDateTime::now_utc() - time::Duration::hours(1),
            time::Duration::days(365),
        )
        .map_err(|e| e.to_string())?;
    Ok((issued.certificate, issued.key))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Applies the ClusterRole naming exactly these nodes' users, and its
/// binding, retrying while the API server starts (2 minutes at most).
async fn allow_impersonation(admin_kubeconfig: &Path, names: &[String]) -> Result<(), String> {
    let settings = ClientSettings {
        kubeconfig: Some(admin_kubeconfig.to_path_buf()),
        ..ClientSettings::default()
    };
    let client = Connection::from_settings(&settings, "capstan")
        .await
        .map_err(|e| e.to_string())?
        .client();
    let within = Duration::from_secs(120);
    impersonation::grant_when_ready(
        &client,
        IMPERSONATION_ROLE,
        NODE_SIMULATOR_USER,
        names,
        within,
    )
    .await
    .map_err(|e| e.to_string())
}
