//! Configuration of `capstan-nodes`: defaults, then an optional TOML file,
//! then `CAPSTAN_*` environment variables, then flags. Flag names are the
//! kubelet's (`--node-labels`, `--register-with-taints`, `--node-ip`,
//! `--tls-cert-file`, `--client-ca-file`, `--healthz-port`) and
//! kube-controller-manager's (`--kubeconfig`, `--kube-api-qps`,
//! `--cluster-cidr`, `--node-cidr-mask-size`) where they have one.

use std::path::PathBuf;

use clap::Parser;
use serde::Deserialize;

pub use capstan_telemetry::settings::ConfigError;

/// Command-line flags; every one optional so unset flags fall through.
#[derive(Debug, Default, Parser)]
#[command(
    name = "capstan-nodes",
    version,
    about = "Simulated nodes that run pods (kwok's role)"
)]
pub struct Flags {
    /// A TOML file with any of the settings below (underscores for dashes).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// The kubeconfig to reach the API with.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Requests per second to the API (all nodes together); <= 0 is unlimited.
    #[arg(long, allow_negative_numbers = true)]
    pub kube_api_qps: Option<f32>,
    /// Requests that may go at once after a quiet spell.
    #[arg(long)]
    pub kube_api_burst: Option<u32>,
    /// How many nodes to simulate.
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Node names are this prefix and a number from 0.
    #[arg(long)]
    pub name_prefix: Option<String>,
    /// CPUs per node (a quantity: 32, 7500m).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Memory per node (a quantity: 256Gi).
    #[arg(long)]
    pub memory: Option<String>,
    /// Pods per node.
    #[arg(long)]
    pub pods: Option<String>,
    /// Ephemeral storage per node (a quantity).
    #[arg(long)]
    pub ephemeral_storage: Option<String>,
    /// Other resources per node: `example.com/gpu=8,example.com/fpga=2`.
    #[arg(long)]
    pub extended_resources: Option<String>,
    /// Labels every node gets: `key=value,...` (the kubelet's --node-labels).
    #[arg(long, visible_alias = "node-labels")]
    pub labels: Option<String>,
    /// Taints every node registers with: `key=value:Effect,key:Effect`.
    #[arg(long, visible_alias = "register-with-taints")]
    pub taints: Option<String>,
    /// Zones the nodes are spread over, round-robin: `zone-a,zone-b,zone-c`.
    #[arg(long)]
    pub zones: Option<String>,
    /// The range the nodes' pod CIDRs are carved from.
    #[arg(long)]
    pub cluster_cidr: Option<String>,
    /// The prefix length of each node's pod CIDR.
    #[arg(long)]
    pub node_cidr_mask_size: Option<u8>,
    /// The address every node reports, where this process is reached.
    #[arg(long)]
    pub node_ip: Option<String>,
    /// The HTTPS port of the kubelet API and metrics.k8s.io (0: any free port).
    #[arg(long)]
    pub kubelet_port: Option<u16>,
    /// The serving certificate (PEM); generated when not given.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// The CA whose client certificates may call the kubelet API; when not
    /// given, the API server's `extension-apiserver-authentication` ConfigMap says.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// The CA bundle written in the metrics APIService (the generated
    /// certificate's CA when the certificate is generated).
    #[arg(long)]
    pub metrics_ca_file: Option<PathBuf>,
    /// Register metrics.k8s.io/v1beta1 (APIService, Service, Endpoints).
    #[arg(long)]
    pub register_metrics_api: Option<bool>,
    /// Address of the plain-HTTP health, metrics and admin endpoint.
    #[arg(long)]
    pub healthz_bind_address: Option<String>,
    /// Port of the health, metrics and admin endpoint (0: any free port).
    #[arg(long)]
    pub healthz_port: Option<u16>,
    /// How long the containers of pods that finish (restartPolicy Never or
    /// OnFailure) run unless the pod's annotation says otherwise.
    #[arg(long)]
    pub pod_run_duration: Option<String>,
    /// Lease renewals in flight at once (kwok's flag).
    #[arg(long)]
    pub node_lease_parallelism: Option<usize>,
    /// Log filter (`info`, `capstan_nodes=debug`, ...).
    #[arg(long)]
    pub log_level: Option<String>,
    /// Instead of running the nodes: let USER (the identity the nodes will
    /// run as, e.g. `system:capstan-nodes`) impersonate exactly these
    /// nodes' users, with the kubeconfig's credentials (an admin's), then exit.
    #[arg(long, value_name = "USER")]
    pub grant_impersonation_to: Option<String>,
}

/// The settled configuration, as text (the settings module parses it).
#[derive(Debug, Clone, Deserialize)]
pub struct NodesConfig {
    pub kubeconfig: String,
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    pub nodes: usize,
    pub name_prefix: String,
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    pub ephemeral_storage: String,
    pub extended_resources: String,
    pub labels: String,
    pub taints: String,
    pub zones: String,
    pub cluster_cidr: String,
    pub node_cidr_mask_size: u8,
    pub node_ip: String,
    pub kubelet_port: u16,
    pub tls_cert_file: String,
    pub tls_private_key_file: String,
    pub client_ca_file: String,
    pub metrics_ca_file: String,
    pub register_metrics_api: bool,
    pub healthz_bind_address: String,
    pub healthz_port: u16,
    pub pod_run_duration: String,
    pub node_lease_parallelism: usize,
    pub log_level: String,
}

impl NodesConfig {
    pub fn load(flags: &Flags) -> Result<NodesConfig, ConfigError> {
        let defaults = config::Config::builder()
            .set_default("kubeconfig", "")?
            // 5,000 nodes renew 500 Leases a second: the kubelet's own
            // limit (50/s) times a few, for the whole process.
            .set_default("kube_api_qps", 1000.0)?
            .set_default("kube_api_burst", 2000)?
            .set_default("nodes", 1)?
            .set_default("name_prefix", "capstan-node-")?
            .set_default("cpu", "32")?
            .set_default("memory", "256Gi")?
            .set_default("pods", "110")?
            .set_default("ephemeral_storage", "100Gi")?
            .set_default("extended_resources", "")?
            .set_default("labels", "")?
            .set_default("taints", "")?
            .set_default("zones", "")?
            .set_default("cluster_cidr", "10.128.0.0/9")?
            .set_default("node_cidr_mask_size", 24)?
            .set_default("node_ip", "127.0.0.1")?
            .set_default("kubelet_port", 10250)?
            .set_default("tls_cert_file", "")?
            .set_default("tls_private_key_file", "")?
            .set_default("client_ca_file", "")?
            .set_default("metrics_ca_file", "")?
            .set_default("register_metrics_api", true)?
            .set_default("healthz_bind_address", "127.0.0.1")?
            .set_default("healthz_port", 10248)?
            .set_default("pod_run_duration", "1s")?
            .set_default("node_lease_parallelism", 16)?
            .set_default("log_level", "info")?;
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let text = |v: &Option<String>| v.clone();
        let overrides: Vec<(&str, Option<String>)> = vec![
            ("kubeconfig", path(&flags.kubeconfig)),
            ("kube_api_qps", flags.kube_api_qps.map(|v| v.to_string())),
            (
                "kube_api_burst",
                flags.kube_api_burst.map(|v| v.to_string()),
            ),
            ("nodes", flags.nodes.map(|v| v.to_string())),
            ("name_prefix", text(&flags.name_prefix)),
            ("cpu", text(&flags.cpu)),
            ("memory", text(&flags.memory)),
            ("pods", text(&flags.pods)),
            ("ephemeral_storage", text(&flags.ephemeral_storage)),
            ("extended_resources", text(&flags.extended_resources)),
            ("labels", text(&flags.labels)),
            ("taints", text(&flags.taints)),
            ("zones", text(&flags.zones)),
            ("cluster_cidr", text(&flags.cluster_cidr)),
            (
                "node_cidr_mask_size",
                flags.node_cidr_mask_size.map(|v| v.to_string()),
            ),
            ("node_ip", text(&flags.node_ip)),
            ("kubelet_port", flags.kubelet_port.map(|v| v.to_string())),
            ("tls_cert_file", path(&flags.tls_cert_file)),
            ("tls_private_key_file", path(&flags.tls_private_key_file)),
            ("client_ca_file", path(&flags.client_ca_file)),
            ("metrics_ca_file", path(&flags.metrics_ca_file)),
            (
                "register_metrics_api",
                flags.register_metrics_api.map(|v| v.to_string()),
            ),
            ("healthz_bind_address", text(&flags.healthz_bind_address)),
            ("healthz_port", flags.healthz_port.map(|v| v.to_string())),
            ("pod_run_duration", text(&flags.pod_run_duration)),
            (
                "node_lease_parallelism",
                flags.node_lease_parallelism.map(|v| v.to_string()),
            ),
            ("log_level", text(&flags.log_level)),
        ];
        capstan_telemetry::settings::load_layered(
            defaults,
            flags.config_file.as_deref(),
            &overrides,
        )
    }
}
