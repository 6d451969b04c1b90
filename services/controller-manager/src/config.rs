//! Configuration: defaults, then an optional TOML file, then `CAPSTAN_*`
//! environment variables, then flags, with kube-controller-manager's flag
//! names wherever it has one.

use std::path::PathBuf;
use std::time::Duration;

use capstan_client::connect::ClientSettings;
use capstan_client::leader::LeaderElectionConfig;
use capstan_telemetry::settings::ConfigError;
use clap::Parser;
use serde::Deserialize;

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
    /// The kubeconfig with the API server's address and this component's
    /// credentials (`system:kube-controller-manager`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Controllers to run: `*` for every default one, `name` to add one,
    /// `-name` to leave one out (e.g. `*,-cronjob`).
    #[arg(long)]
    pub controllers: Option<String>,
    /// Run only while holding the Lease `kube-system/kube-controller-manager`.
    #[arg(long)]
    pub leader_elect: Option<bool>,
    /// How long others wait after the last renewal before taking the lease.
    #[arg(long)]
    pub leader_elect_lease_duration: Option<String>,
    /// How long the leader tries to renew before giving up leading.
    #[arg(long)]
    pub leader_elect_renew_deadline: Option<String>,
    /// How often candidates try to take, and the leader to renew, the lease.
    #[arg(long)]
    pub leader_elect_retry_period: Option<String>,
    /// The Lease's namespace.
    #[arg(long)]
    pub leader_elect_resource_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
    /// Requests per second to the API, per client (`<= 0`: unlimited).
    #[arg(long)]
    pub kube_api_qps: Option<f32>,
    /// Requests that may go at once after a quiet spell.
    #[arg(long)]
    pub kube_api_burst: Option<u32>,
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

/// The settled configuration.
#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    pub controllers: String,
    pub leader_elect: bool,
    pub leader_elect_lease_duration: String,
    pub leader_elect_renew_deadline: String,
    pub leader_elect_retry_period: String,
    pub leader_elect_resource_namespace: String,
    pub leader_elect_resource_name: String,
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    pub use_service_account_credentials: bool,
    pub concurrent_deployment_syncs: usize,
    pub concurrent_replicaset_syncs: usize,
    pub concurrent_rc_syncs: usize,
    pub concurrent_statefulset_syncs: usize,
    pub concurrent_daemonset_syncs: usize,
    pub concurrent_job_syncs: usize,
    pub concurrent_cron_job_syncs: usize,
    pub concurrent_ttl_after_finished_syncs: usize,
    pub concurrent_gc_syncs: usize,
    pub concurrent_namespace_syncs: usize,
    pub concurrent_resource_quota_syncs: usize,
    pub concurrent_endpoint_syncs: usize,
    pub concurrent_service_endpoint_syncs: usize,
    pub concurrent_horizontal_pod_autoscaler_syncs: usize,
    pub node_monitor_grace_period: String,
    pub node_startup_grace_period: String,
    pub node_monitor_period: String,
    pub node_eviction_rate: f64,
    pub secondary_node_eviction_rate: f64,
    pub large_cluster_size_threshold: usize,
    pub unhealthy_zone_threshold: f64,
    pub horizontal_pod_autoscaler_sync_period: String,
    pub horizontal_pod_autoscaler_downscale_stabilization: String,
    pub horizontal_pod_autoscaler_tolerance: f64,
    pub horizontal_pod_autoscaler_cpu_initialization_period: String,
    pub horizontal_pod_autoscaler_initial_readiness_delay: String,
    pub terminated_pod_gc_threshold: i64,
    pub max_endpoints_per_slice: i64,
    pub root_ca_file: String,
    pub secure_port: u16,
    pub bind_address: String,
    pub log_level: String,
    pub experimental_watch_delay: String,
}

/// kube-controller-manager's port for `/healthz` and `/metrics`.
pub const DEFAULT_SECURE_PORT: u16 = 10257;

fn defaults() -> Result<config::ConfigBuilder<config::builder::DefaultState>, ConfigError> {
    let builder = config::Config::builder()
        .set_default("controllers", "*")?
        .set_default("leader_elect", true)?
        .set_default("leader_elect_lease_duration", "15s")?
        .set_default("leader_elect_renew_deadline", "10s")?
        .set_default("leader_elect_retry_period", "2s")?
        .set_default("leader_elect_resource_namespace", "kube-system")?
        .set_default("leader_elect_resource_name", "kube-controller-manager")?
        .set_default("kube_api_qps", 20.0)?
        .set_default("kube_api_burst", 30)?
        .set_default("use_service_account_credentials", true)?
        .set_default("concurrent_deployment_syncs", 5)?
        .set_default("concurrent_replicaset_syncs", 5)?
        .set_default("concurrent_rc_syncs", 5)?
        .set_default("concurrent_statefulset_syncs", 5)?
        .set_default("concurrent_daemonset_syncs", 2)?
        .set_default("concurrent_job_syncs", 5)?
        .set_default("concurrent_cron_job_syncs", 5)?
        .set_default("concurrent_ttl_after_finished_syncs", 5)?
        .set_default("concurrent_gc_syncs", 20)?
        .set_default("concurrent_namespace_syncs", 10)?
        .set_default("concurrent_resource_quota_syncs", 5)?
        .set_default("concurrent_endpoint_syncs", 5)?
        .set_default("concurrent_service_endpoint_syncs", 5)?
        .set_default("concurrent_horizontal_pod_autoscaler_syncs", 5)?
        .set_default("node_monitor_grace_period", "40s")?
        .set_default("node_startup_grace_period", "1m")?
        .set_default("node_monitor_period", "5s")?
        .set_default("node_eviction_rate", 0.1)?
        .set_default("secondary_node_eviction_rate", 0.01)?
        .set_default("large_cluster_size_threshold", 50)?
        .set_default("unhealthy_zone_threshold", 0.55)?
        .set_default("horizontal_pod_autoscaler_sync_period", "15s")?
        .set_default("horizontal_pod_autoscaler_downscale_stabilization", "5m")?
        .set_default("horizontal_pod_autoscaler_tolerance", 0.1)?
        .set_default("horizontal_pod_autoscaler_cpu_initialization_period", "5m")?
        .set_default("horizontal_pod_autoscaler_initial_readiness_delay", "30s")?
        .set_default("terminated_pod_gc_threshold", 12500)?
        .set_default("max_endpoints_per_slice", 100)?
        .set_default("root_ca_file", "")?
        .set_default("secure_port", DEFAULT_SECURE_PORT)?
        .set_default("bind_address", "0.0.0.0")?
        .set_default("log_level", "info")?
        .set_default("experimental_watch_delay", "")?;
    Ok(builder)
}

fn text<T: ToString>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(T::to_string)
}

fn overrides(flags: &Flags) -> Vec<(&'static str, Option<String>)> {
    vec![
        (
            "kubeconfig",
            flags.kubeconfig.as_ref().map(|p| p.display().to_string()),
        ),
        ("controllers", flags.controllers.clone()),
        ("leader_elect", text(&flags.leader_elect)),
        (
            "leader_elect_lease_duration",
            flags.leader_elect_lease_duration.clone(),
        ),
        (
            "leader_elect_renew_deadline",
            flags.leader_elect_renew_deadline.clone(),
        ),
        (
            "leader_elect_retry_period",
            flags.leader_elect_retry_period.clone(),
        ),
        (
            "leader_elect_resource_namespace",
            flags.leader_elect_resource_namespace.clone(),
        ),
        (
            "leader_elect_resource_name",
            flags.leader_elect_resource_name.clone(),
        ),
        ("kube_api_qps", text(&flags.kube_api_qps)),
        ("kube_api_burst", text(&flags.kube_api_burst)),
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
    ]
}

impl Settings {
    /// Defaults, then the file, then `CAPSTAN_*` variables, then flags; checked.
    pub fn load(flags: &Flags) -> Result<Settings, ConfigError> {
        let settings: Settings = capstan_telemetry::settings::load_layered(
            defaults()?,
            flags.config_file.as_deref(),
            &overrides(flags),
        )?;
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let election = self.leader_election()?;
        if election.renew_deadline >= election.lease_duration {
            return Err(invalid(
                "leader_elect_renew_deadline",
                "must be shorter than --leader-elect-lease-duration",
            ));
        }
        if election.retry_period.is_zero() {
            return Err(invalid("leader_elect_retry_period", "must be positive"));
        }
        for (field, text) in [
            ("node_monitor_grace_period", &self.node_monitor_grace_period),
            ("node_startup_grace_period", &self.node_startup_grace_period),
            ("node_monitor_period", &self.node_monitor_period),
            (
                "horizontal_pod_autoscaler_sync_period",
                &self.horizontal_pod_autoscaler_sync_period,
            ),
            (
                "horizontal_pod_autoscaler_downscale_stabilization",
                &self.horizontal_pod_autoscaler_downscale_stabilization,
            ),
            (
                "horizontal_pod_autoscaler_cpu_initialization_period",
                &self.horizontal_pod_autoscaler_cpu_initialization_period,
            ),
            (
                "horizontal_pod_autoscaler_initial_readiness_delay",
                &self.horizontal_pod_autoscaler_initial_readiness_delay,
            ),
        ] {
            duration(field, text)?;
        }
        for (field, text) in [
            ("node_monitor_period", &self.node_monitor_period),
            (
                "horizontal_pod_autoscaler_sync_period",
                &self.horizontal_pod_autoscaler_sync_period,
            ),
        ] {
            if parse_duration(text).is_some_and(|d| d.is_zero()) {
                return Err(invalid(field, "must be positive"));
            }
        }
        let rates = [
            ("node_eviction_rate", self.node_eviction_rate),
            (
                "secondary_node_eviction_rate",
                self.secondary_node_eviction_rate,
            ),
            (
                "horizontal_pod_autoscaler_tolerance",
                self.horizontal_pod_autoscaler_tolerance,
            ),
        ];
        if let Some((field, _)) = rates.iter().find(|(_, v)| !v.is_finite() || *v < 0.0) {
            return Err(invalid(field, "must be a non-negative number"));
        }
        if !(self.unhealthy_zone_threshold > 0.0 && self.unhealthy_zone_threshold <= 1.0) {
            return Err(invalid("unhealthy_zone_threshold", "must be in (0, 1]"));
        }
        if !self.experimental_watch_delay.is_empty() && self.watch_delay().is_none() {
            return Err(invalid(
                "experimental_watch_delay",
                "expected a duration or RESOURCE=DURATION",
            ));
        }
        if self.max_endpoints_per_slice < 1 || self.max_endpoints_per_slice > 1000 {
            return Err(invalid(
                "max_endpoints_per_slice",
                "must be between 1 and 1000",
            ));
        }
        // `--controllers` names are checked by `manager::run`, which knows
        // the controllers; settings sit below them and do not import them.
        Ok(())
    }

    /// The Lease, identity and timings for leader election.
    pub fn leader_election(&self) -> Result<LeaderElectionConfig, ConfigError> {
        let mut config = LeaderElectionConfig::new(
            &self.leader_elect_resource_namespace,
            &self.leader_elect_resource_name,
        );
        config.lease_duration = duration(
            "leader_elect_lease_duration",
            &self.leader_elect_lease_duration,
        )?;
        config.renew_deadline = duration(
            "leader_elect_renew_deadline",
            &self.leader_elect_renew_deadline,
        )?;
        config.retry_period =
            duration("leader_elect_retry_period", &self.leader_elect_retry_period)?;
        Ok(config)
    }

    /// How this component connects (`--kubeconfig`, `--kube-api-qps`, `--kube-api-burst`).
    pub fn client(&self) -> ClientSettings {
        ClientSettings {
            kubeconfig: self.kubeconfig.clone(),
            kube_api_qps: self.kube_api_qps,
            kube_api_burst: self.kube_api_burst,
        }
    }

    /// The watch-delay failpoint, if set: the resource it is limited to
    /// (`pods=5s`), and the delay.
    pub fn watch_delay(&self) -> Option<(Option<String>, Duration)> {
        match self.experimental_watch_delay.split_once('=') {
            _ if self.experimental_watch_delay.is_empty() => None,
            Some((resource, delay)) => Some((Some(resource.to_string()), parse_duration(delay)?)),
            None => Some((None, parse_duration(&self.experimental_watch_delay)?)),
        }
    }

    /// `--node-monitor-grace-period`, checked at load.
    pub fn node_monitor_grace_period(&self) -> Duration {
        parse_duration(&self.node_monitor_grace_period).unwrap_or(Duration::from_secs(40))
    }

    /// A duration setting (checked at load), or `default`.
    pub fn duration_of(&self, text: &str, default: Duration) -> Duration {
        parse_duration(text).unwrap_or(default)
    }

    /// Settings with every default and nothing read from the environment
    /// or a file: for tests and for embedding.
    pub fn defaults() -> Settings {
        let built = defaults().and_then(|b| Ok(b.build()?.try_deserialize::<Settings>()?));
        built.expect("the defaults deserialize")
    }
}

fn invalid(field: &'static str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.to_string(),
    }
}

fn duration(field: &'static str, text: &str) -> Result<Duration, ConfigError> {
    parse_duration(text).ok_or_else(|| invalid(field, &format!("{text:?} is not a duration")))
}

/// Go's duration syntax as kube's flags take it (`15s`, `1m30s`, `500ms`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    humantime::parse_duration(text.trim()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_defaults() {
        let settings = Settings::defaults();
        let election = settings.leader_election().unwrap();
        assert_eq!(election.lease_duration, Duration::from_secs(15));
        assert_eq!(election.renew_deadline, Duration::from_secs(10));
        assert_eq!(election.retry_period, Duration::from_secs(2));
        assert_eq!(election.name, "kube-controller-manager");
        assert_eq!(settings.kube_api_qps, 20.0);
        assert_eq!(settings.kube_api_burst, 30);
        assert_eq!(settings.concurrent_daemonset_syncs, 2);
        assert_eq!(settings.terminated_pod_gc_threshold, 12500);
        assert_eq!(
            settings.node_monitor_grace_period(),
            Duration::from_secs(40)
        );
    }

    #[test]
    fn flags_win_and_bad_values_name_the_field() {
        let flags = Flags::parse_from([
            "capstan-controller-manager",
            "--controllers",
            "*,-cronjob",
            "--leader-elect-lease-duration",
            "1m30s",
        ]);
        let settings = Settings::load(&flags).unwrap();
        assert_eq!(settings.controllers, "*,-cronjob");
        assert_eq!(
            settings.leader_election().unwrap().lease_duration,
            Duration::from_secs(90)
        );
        let flags = Flags::parse_from([
            "capstan-controller-manager",
            "--leader-elect-renew-deadline",
            "20s",
        ]);
        let err = Settings::load(&flags).unwrap_err().to_string();
        assert!(err.contains("leader_elect_renew_deadline"), "{err}");
    }
}
