//! The controller manager's command-line flags: kube-controller-manager's
//! names, the connection and leader-election ones shared with every
//! API client (`capstan_client::flags`).

use std::path::PathBuf;

use capstan_client::flags::{ConnectionFlags, LeaderElectionFlags};
use clap::Parser;

/// Command-line flags. Every flag is optional so that unset flags fall
/// through to the environment, the file and the defaults.
#[derive(Debug, Default, Clone, Parser)]
#[command(
    name = "capstan-controller-manager",
    version,
    about = "kube-controller-manager's loops, as an API client"
)]
pub struct Flags {
    /// A TOML file with any of the settings below (underscores for dashes).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    #[command(flatten)]
    pub connection: ConnectionFlags,
    #[command(flatten)]
    pub election: LeaderElectionFlags,
    /// Controllers to run: `*` for every default one, `name` to add one,
    /// `-name` to leave one out (e.g. `*,-cronjob`).
    #[arg(long)]
    pub controllers: Option<String>,
    /// Each controller acts as its own service account
    /// (`system:serviceaccount:kube-system:<name>-controller`), so RBAC
    /// sees who wrote what; otherwise every controller uses the kubeconfig's identity.
    #[arg(long)]
    pub use_service_account_credentials: Option<bool>,
    /// Deployments synced at once.
    #[arg(long)]
    pub concurrent_deployment_syncs: Option<usize>,
    /// ReplicaSets synced at once.
    #[arg(long)]
    pub concurrent_replicaset_syncs: Option<usize>,
    /// ReplicationControllers synced at once.
    #[arg(long)]
    pub concurrent_rc_syncs: Option<usize>,
    /// StatefulSets synced at once.
    #[arg(long)]
    pub concurrent_statefulset_syncs: Option<usize>,
    /// DaemonSets synced at once.
    #[arg(long)]
    pub concurrent_daemonset_syncs: Option<usize>,
    /// Jobs synced at once.
    #[arg(long)]
    pub concurrent_job_syncs: Option<usize>,
    /// CronJobs synced at once.
    #[arg(long)]
    pub concurrent_cron_job_syncs: Option<usize>,
    /// Finished Jobs checked for their TTL at once.
    #[arg(long)]
    pub concurrent_ttl_after_finished_syncs: Option<usize>,
    /// Objects the garbage collector processes at once.
    #[arg(long)]
    pub concurrent_gc_syncs: Option<usize>,
    /// Namespaces emptied at once.
    #[arg(long)]
    pub concurrent_namespace_syncs: Option<usize>,
    /// ResourceQuotas recounted at once.
    #[arg(long)]
    pub concurrent_resource_quota_syncs: Option<usize>,
    /// Services whose Endpoints are synced at once.
    #[arg(long)]
    pub concurrent_endpoint_syncs: Option<usize>,
    /// Services whose EndpointSlices are synced at once.
    #[arg(long)]
    pub concurrent_service_endpoint_syncs: Option<usize>,
    /// HorizontalPodAutoscalers synced at once.
    #[arg(long)]
    pub concurrent_horizontal_pod_autoscaler_syncs: Option<usize>,
    /// How long a node may go without renewing its Lease before it is
    /// marked NotReady (Unknown).
    #[arg(long)]
    pub node_monitor_grace_period: Option<String>,
    /// How long a node that never reported may take to post its first status.
    #[arg(long)]
    pub node_startup_grace_period: Option<String>,
    /// How often zones are recounted and the node lifecycle controller's
    /// queued taints are tried.
    #[arg(long)]
    pub node_monitor_period: Option<String>,
    /// Nodes per second tainted for eviction in a healthy zone.
    #[arg(long)]
    pub node_eviction_rate: Option<f64>,
    /// Nodes per second tainted in a large zone that is mostly unhealthy.
    #[arg(long)]
    pub secondary_node_eviction_rate: Option<f64>,
    /// A zone of more nodes than this is large (see the secondary rate).
    #[arg(long)]
    pub large_cluster_size_threshold: Option<usize>,
    /// Share of unready nodes (more than two) that makes a zone unhealthy.
    #[arg(long)]
    pub unhealthy_zone_threshold: Option<f64>,
    /// How often each HorizontalPodAutoscaler is reconciled.
    #[arg(long)]
    pub horizontal_pod_autoscaler_sync_period: Option<String>,
    /// How far back the autoscaler looks for a higher recommendation before scaling down.
    #[arg(long)]
    pub horizontal_pod_autoscaler_downscale_stabilization: Option<String>,
    /// Ratio of usage to target within which the autoscaler does nothing.
    #[arg(long)]
    pub horizontal_pod_autoscaler_tolerance: Option<f64>,
    /// After a pod starts, how long its CPU samples may be skipped as start-up noise.
    #[arg(long)]
    pub horizontal_pod_autoscaler_cpu_initialization_period: Option<String>,
    /// After a pod starts, how long readiness may take to settle.
    #[arg(long)]
    pub horizontal_pod_autoscaler_initial_readiness_delay: Option<String>,
    /// Terminated pods kept before the oldest are deleted (0: none deleted).
    #[arg(long)]
    pub terminated_pod_gc_threshold: Option<i64>,
    /// Most endpoints in one EndpointSlice.
    #[arg(long)]
    pub max_endpoints_per_slice: Option<i64>,
    /// The cluster's CA (PEM), published in every namespace as the
    /// `kube-root-ca.crt` ConfigMap; none is published without it.
    #[arg(long)]
    pub root_ca_file: Option<String>,
    /// Port of `/healthz`, `/readyz` and `/metrics` (0: not served).
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// Address `/healthz` and `/metrics` listen on.
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Log filter (`info`, `capstan_controller_manager=debug`, ...).
    #[arg(long)]
    pub log_level: Option<String>,
    /// Test-only failpoint: every watch event (or, as `pods=5s`, those of
    /// one resource) reaches the caches this late; see `failpoints.rs`.
    /// Never set in production.
    #[arg(long)]
    pub experimental_watch_delay: Option<String>,
}

fn text<T: ToString>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(T::to_string)
}

/// The set flags as config-crate overrides (dashes as underscores).
pub(super) fn overrides(flags: &Flags) -> Vec<(&'static str, Option<String>)> {
    let shared = [flags.connection.overrides(), flags.election.overrides()];
    let own = vec![
        ("controllers", flags.controllers.clone()),
        (
            "use_service_account_credentials",
            text(&flags.use_service_account_credentials),
        ),
        (
            "concurrent_deployment_syncs",
            text(&flags.concurrent_deployment_syncs),
        ),
        (
            "concurrent_replicaset_syncs",
            text(&flags.concurrent_replicaset_syncs),
        ),
        ("concurrent_rc_syncs", text(&flags.concurrent_rc_syncs)),
        (
            "concurrent_statefulset_syncs",
            text(&flags.concurrent_statefulset_syncs),
        ),
        (
            "concurrent_daemonset_syncs",
            text(&flags.concurrent_daemonset_syncs),
        ),
        ("concurrent_job_syncs", text(&flags.concurrent_job_syncs)),
        (
            "concurrent_cron_job_syncs",
            text(&flags.concurrent_cron_job_syncs),
        ),
        (
            "concurrent_ttl_after_finished_syncs",
            text(&flags.concurrent_ttl_after_finished_syncs),
        ),
        ("concurrent_gc_syncs", text(&flags.concurrent_gc_syncs)),
        (
            "concurrent_namespace_syncs",
            text(&flags.concurrent_namespace_syncs),
        ),
        (
            "concurrent_resource_quota_syncs",
            text(&flags.concurrent_resource_quota_syncs),
        ),
        (
            "concurrent_endpoint_syncs",
            text(&flags.concurrent_endpoint_syncs),
        ),
        (
            "concurrent_service_endpoint_syncs",
            text(&flags.concurrent_service_endpoint_syncs),
        ),
        (
            "concurrent_horizontal_pod_autoscaler_syncs",
            text(&flags.concurrent_horizontal_pod_autoscaler_syncs),
        ),
        (
            "node_monitor_grace_period",
            flags.node_monitor_grace_period.clone(),
        ),
        (
            "node_startup_grace_period",
            flags.node_startup_grace_period.clone(),
        ),
        ("node_monitor_period", flags.node_monitor_period.clone()),
        ("node_eviction_rate", text(&flags.node_eviction_rate)),
        (
            "secondary_node_eviction_rate",
            text(&flags.secondary_node_eviction_rate),
        ),
        (
            "large_cluster_size_threshold",
            text(&flags.large_cluster_size_threshold),
        ),
        (
            "unhealthy_zone_threshold",
            text(&flags.unhealthy_zone_threshold),
        ),
        (
            "horizontal_pod_autoscaler_sync_period",
            flags.horizontal_pod_autoscaler_sync_period.clone(),
        ),
        (
            "horizontal_pod_autoscaler_downscale_stabilization",
            flags
                .horizontal_pod_autoscaler_downscale_stabilization
                .clone(),
        ),
        (
            "horizontal_pod_autoscaler_tolerance",
            text(&flags.horizontal_pod_autoscaler_tolerance),
        ),
        (
            "horizontal_pod_autoscaler_cpu_initialization_period",
            flags
                .horizontal_pod_autoscaler_cpu_initialization_period
                .clone(),
        ),
        (
            "horizontal_pod_autoscaler_initial_readiness_delay",
            flags
                .horizontal_pod_autoscaler_initial_readiness_delay
                .clone(),
        ),
        (
            "terminated_pod_gc_threshold",
            text(&flags.terminated_pod_gc_threshold),
        ),
        (
            "max_endpoints_per_slice",
            text(&flags.max_endpoints_per_slice),
        ),
        ("root_ca_file", flags.root_ca_file.clone()),
        ("secure_port", text(&flags.secure_port)),
        ("bind_address", flags.bind_address.clone()),
        ("log_level", flags.log_level.clone()),
        (
            "experimental_watch_delay",
            flags.experimental_watch_delay.clone(),
        ),
    ];
    [shared.concat(), own].concat()
}
