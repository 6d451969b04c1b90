//! Configuration: defaults, then an optional TOML file, then `CAPSTAN_*`
//! environment variables, then flags, with kube-controller-manager's flag
//! names wherever it has one.

use std::path::PathBuf;
use std::time::Duration;

use capstan_client::connect::ClientSettings;
use capstan_client::leader::LeaderElectionConfig;
use capstan_telemetry::settings::ConfigError;
use serde::Deserialize;

mod flags;
mod validation;

use flags::overrides;
pub use flags::Flags;

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
mod tests;
