//! Configuration of a store member: defaults, then an optional file, then
//! `CAPSTAN_*` environment variables, then flags (with etcd's flag names).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

pub mod tls;

/// Command-line flags. Every flag is optional so that unset flags fall
/// through to the environment, the file and the defaults.
#[derive(Debug, Default, Parser)]
#[command(
    name = "capstan-store",
    version,
    about = "One member of Capstan's etcd-compatible store"
)]
pub struct Flags {
    /// A TOML file with any of the settings below (underscores for dashes).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Human-readable name of this member.
    #[arg(long)]
    pub name: Option<String>,
    /// Directory for the raft log and the MVCC state.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Comma-separated URLs to serve clients (gRPC and /metrics, /health) on.
    #[arg(long)]
    pub listen_client_urls: Option<String>,
    /// Comma-separated client URLs to advertise to the cluster.
    #[arg(long)]
    pub advertise_client_urls: Option<String>,
    /// Comma-separated URLs to listen on for peer traffic.
    #[arg(long)]
    pub listen_peer_urls: Option<String>,
    /// Comma-separated peer URLs of this member, as others see it.
    #[arg(long)]
    pub initial_advertise_peer_urls: Option<String>,
    /// `name=peer-url,...` for every member of a new cluster.
    #[arg(long)]
    pub initial_cluster: Option<String>,
    /// `new` to bootstrap a cluster, `existing` to join one.
    #[arg(long)]
    pub initial_cluster_state: Option<String>,
    /// Distinguishes clusters bootstrapped from the same member list.
    #[arg(long)]
    pub initial_cluster_token: Option<String>,
    /// Applied entries after which the front of the raft log is dropped.
    #[arg(long)]
    pub snapshot_count: Option<u64>,
    /// History to keep: a duration (`1h`, `30m`, `10s`; a bare number is
    /// hours) in periodic mode, a revision count in revision mode; 0 = off.
    #[arg(long)]
    pub auto_compaction_retention: Option<String>,
    /// `periodic` or `revision`.
    #[arg(long)]
    pub auto_compaction_mode: Option<String>,
    /// Raft heartbeat interval in milliseconds.
    #[arg(long)]
    pub heartbeat_interval: Option<u64>,
    /// Raft election timeout in milliseconds.
    #[arg(long)]
    pub election_timeout: Option<u64>,
    /// Largest client request accepted, in bytes.
    #[arg(long)]
    pub max_request_bytes: Option<u64>,
    /// Most operations in one txn.
    #[arg(long)]
    pub max_txn_ops: Option<u64>,
    /// Size of the backend at which writes are refused and the NOSPACE
    /// alarm raised, in bytes: 0 is etcd's default (2 GiB), negative is none.
    #[arg(long, allow_negative_numbers = true)]
    pub quota_backend_bytes: Option<i64>,
    /// Interval of watch progress notifications, e.g. `10m` or `500ms`.
    #[arg(long)]
    pub watch_progress_notify_interval: Option<String>,
    /// Log filter (`info`, `debug`, `capstan_store=debug,raft=warn`, ...).
    #[arg(long)]
    pub log_level: Option<String>,
    /// A snapshot file (from `etcdctl snapshot save`) that a new cluster's
    /// members start from instead of an empty store (ignored when the
    /// data directory already holds a member).
    #[arg(long)]
    pub restore_snapshot: Option<PathBuf>,
    /// Serves `/debug/failpoints/...` on the client URLs, for fault tests
    /// (see `failpoints.rs`); never on in production.
    #[arg(long)]
    pub experimental_enable_failpoints: bool,
    /// Tokens handed out by `Authenticate`: `simple`, or
    /// `jwt,pub-key=FILE,priv-key=FILE,sign-method=ES256,ttl=5m`.
    #[arg(long)]
    pub auth_token: Option<String>,
    /// Seconds a simple token lives past its last use.
    #[arg(long)]
    pub auth_token_ttl: Option<u64>,
    /// Cost of the bcrypt hash of user passwords (4 to 31).
    #[arg(long)]
    pub bcrypt_cost: Option<u32>,
    #[command(flatten)]
    pub tls: tls::TlsFlags,
}

/// The settled configuration.
#[derive(Debug, Clone, Deserialize)]
pub struct StoreConfig {
    pub name: String,
    pub data_dir: PathBuf,
    pub listen_client_urls: String,
    pub advertise_client_urls: String,
    pub listen_peer_urls: String,
    pub initial_advertise_peer_urls: String,
    pub initial_cluster: String,
    pub initial_cluster_state: String,
    pub initial_cluster_token: String,
    pub snapshot_count: u64,
    pub auto_compaction_retention: String,
    pub auto_compaction_mode: String,
    pub heartbeat_interval: u64,
    pub election_timeout: u64,
    pub max_request_bytes: u64,
    pub max_txn_ops: u64,
    pub quota_backend_bytes: i64,
    pub watch_progress_notify_interval: String,
    pub log_level: String,
    pub restore_snapshot: String,
    pub experimental_enable_failpoints: bool,
    pub auth_token: String,
    pub auth_token_ttl: u64,
    pub bcrypt_cost: u32,
    /// Loaded beside the rest (see `tls.rs`).
    #[serde(skip)]
    pub tls: tls::TlsSettings,
}

pub use capstan_telemetry::settings::ConfigError;

impl StoreConfig {
    /// Defaults, then the file, then `CAPSTAN_*` variables, then flags;
    /// then what derives from those, checked.
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let file = flags.config_file.as_deref();
        let overrides = flag_overrides(flags);
        let mut config: StoreConfig =
            capstan_telemetry::settings::load_layered(defaults()?, file, &overrides)?;
        config.tls = tls::TlsSettings::load(&flags.tls, file)?;
        config.fill_derived_defaults();
        config.validate()?;
        Ok(config)
    }

    /// Defaults that depend on other settings, as etcd derives them.
    fn fill_derived_defaults(&mut self) {
        if self.advertise_client_urls.is_empty() {
            self.advertise_client_urls = self.listen_client_urls.clone();
        }
        if self.initial_advertise_peer_urls.is_empty() {
            self.initial_advertise_peer_urls = self.listen_peer_urls.clone();
        }
        if self.initial_cluster.is_empty() {
            self.initial_cluster = split_urls(&self.initial_advertise_peer_urls)
                .iter()
                .map(|url| format!("{}={url}", self.name))
                .collect::<Vec<_>>()
                .join(",");
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, reason: &str| ConfigError::Invalid {
            field,
            reason: reason.to_string(),
        };
        if self.heartbeat_interval == 0 {
            return Err(invalid("heartbeat_interval", "must be positive"));
        }
        if self.election_timeout < 5 * self.heartbeat_interval {
            return Err(invalid(
                "election_timeout",
                "must be at least 5 heartbeat intervals",
            ));
        }
        if !matches!(self.initial_cluster_state.as_str(), "new" | "existing") {
            return Err(invalid(
                "initial_cluster_state",
                "must be `new` or `existing`",
            ));
        }
        if self.snapshot_count == 0 {
            return Err(invalid("snapshot_count", "must be positive"));
        }
        if self.auth_token_ttl == 0 {
            return Err(invalid("auth_token_ttl", "must be positive"));
        }
        self.compaction_policy()?;
        parse_duration(&self.watch_progress_notify_interval)
            .ok_or_else(|| invalid("watch_progress_notify_interval", "not a duration"))?;
        Ok(())
    }

    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.heartbeat_interval)
    }

    pub fn election_ticks(&self) -> usize {
        (self.election_timeout / self.heartbeat_interval) as usize
    }

    /// etcd's lease minimum: 1.5 election timeouts, rounded up to seconds.
    pub fn min_lease_ttl(&self) -> i64 {
        (self.election_timeout * 3).div_ceil(2000) as i64
    }

    pub fn progress_notify_interval(&self) -> Duration {
        parse_duration(&self.watch_progress_notify_interval).expect("validated")
    }

    pub fn compaction_policy(&self) -> Result<CompactionPolicy, ConfigError> {
        let retention = self.auto_compaction_retention.trim();
        let bad = |reason: &str| ConfigError::Invalid {
            field: "auto_compaction_retention",
            reason: reason.to_string(),
        };
        match self.auto_compaction_mode.as_str() {
            "periodic" => {
                let period = match retention.parse::<u64>() {
                    Ok(hours) => Duration::from_secs(hours * 3600),
                    Err(_) => parse_duration(retention).ok_or_else(|| bad("not a duration"))?,
                };
                Ok(if period.is_zero() {
                    CompactionPolicy::Off
                } else {
                    CompactionPolicy::Periodic(period)
                })
            }
            "revision" => {
                let keep: i64 = retention.parse().map_err(|_| bad("not a revision count"))?;
                Ok(if keep <= 0 {
                    CompactionPolicy::Off
                } else {
                    CompactionPolicy::KeepRevisions(keep)
                })
            }
            _ => Err(ConfigError::Invalid {
                field: "auto_compaction_mode",
                reason: "must be `periodic` or `revision`".into(),
            }),
        }
    }
}

/// etcd's defaults, where etcd has the setting.
fn defaults() -> Result<config::ConfigBuilder<config::builder::DefaultState>, ConfigError> {
    Ok(config::Config::builder()
        .set_default("name", "default")?
        .set_default("data_dir", "default.capstan")?
        .set_default("listen_client_urls", "http://127.0.0.1:2379")?
        .set_default("advertise_client_urls", "")?
        .set_default("listen_peer_urls", "http://127.0.0.1:2380")?
        .set_default("initial_advertise_peer_urls", "")?
        .set_default("initial_cluster", "")?
        .set_default("initial_cluster_state", "new")?
        .set_default("initial_cluster_token", "capstan-cluster")?
        .set_default("snapshot_count", 10_000)?
        .set_default("auto_compaction_retention", "0")?
        .set_default("auto_compaction_mode", "periodic")?
        .set_default("heartbeat_interval", 100)?
        .set_default("election_timeout", 1000)?
        .set_default("max_request_bytes", 1_572_864)?
        .set_default("max_txn_ops", 128)?
        .set_default("quota_backend_bytes", 0)?
        .set_default("watch_progress_notify_interval", "10m")?
        .set_default("log_level", "info")?
        .set_default("restore_snapshot", "")?
        .set_default("experimental_enable_failpoints", false)?
        .set_default("auth_token", "simple")?
        .set_default("auth_token_ttl", 300)?
        .set_default("bcrypt_cost", 10)?)
}

/// The settings given as flags, by the name the other layers use.
fn flag_overrides(flags: &Flags) -> Vec<(&'static str, Option<String>)> {
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let number = |n: Option<u64>| n.map(|n| n.to_string());
    let f = flags;
    vec![
        ("restore_snapshot", path(&f.restore_snapshot)),
        ("name", f.name.clone()),
        ("data_dir", path(&f.data_dir)),
        ("listen_client_urls", f.listen_client_urls.clone()),
        ("advertise_client_urls", f.advertise_client_urls.clone()),
        ("listen_peer_urls", f.listen_peer_urls.clone()),
        (
            "initial_advertise_peer_urls",
            f.initial_advertise_peer_urls.clone(),
        ),
        ("initial_cluster", f.initial_cluster.clone()),
        ("initial_cluster_state", f.initial_cluster_state.clone()),
        ("initial_cluster_token", f.initial_cluster_token.clone()),
        ("snapshot_count", number(f.snapshot_count)),
        (
            "auto_compaction_retention",
            f.auto_compaction_retention.clone(),
        ),
        ("auto_compaction_mode", f.auto_compaction_mode.clone()),
        ("heartbeat_interval", number(f.heartbeat_interval)),
        ("election_timeout", number(f.election_timeout)),
        ("max_request_bytes", number(f.max_request_bytes)),
        ("max_txn_ops", number(f.max_txn_ops)),
        (
            "quota_backend_bytes",
            f.quota_backend_bytes.map(|n| n.to_string()),
        ),
        (
            "watch_progress_notify_interval",
            f.watch_progress_notify_interval.clone(),
        ),
        ("log_level", f.log_level.clone()),
        (
            "experimental_enable_failpoints",
            f.experimental_enable_failpoints.then(|| "true".to_string()),
        ),
        ("auth_token", f.auth_token.clone()),
        ("auth_token_ttl", number(f.auth_token_ttl)),
        ("bcrypt_cost", f.bcrypt_cost.map(|n| n.to_string())),
    ]
}

/// How automatic compaction bounds history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CompactionPolicy {
    Off,
    /// Keep at least this much time of history.
    Periodic(Duration),
    /// Keep this many revisions of history.
    KeepRevisions(i64),
}

pub fn split_urls(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses `500ms`, `10s`, `5m`, `1h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        "m" => Some(Duration::from_secs(number * 60)),
        "h" => Some(Duration::from_secs(number * 3600)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_a_single_member_cluster() {
        let flags = Flags {
            name: Some("m1".into()),
            ..Default::default()
        };
        let config = StoreConfig::load(&flags).unwrap();
        assert_eq!(config.initial_cluster, "m1=http://127.0.0.1:2380");
        assert_eq!(config.advertise_client_urls, "http://127.0.0.1:2379");
        assert_eq!(config.election_ticks(), 10);
        assert_eq!(config.min_lease_ttl(), 2);
        assert_eq!(config.compaction_policy().unwrap(), CompactionPolicy::Off);
    }

    #[test]
    fn compaction_retention_forms() {
        let mut config = StoreConfig::load(&Flags::default()).unwrap();
        config.auto_compaction_retention = "1".into();
        assert_eq!(
            config.compaction_policy().unwrap(),
            CompactionPolicy::Periodic(Duration::from_secs(3600))
        );
        config.auto_compaction_retention = "30s".into();
        assert_eq!(
            config.compaction_policy().unwrap(),
            CompactionPolicy::Periodic(Duration::from_secs(30))
        );
        config.auto_compaction_mode = "revision".into();
        config.auto_compaction_retention = "1000".into();
        assert_eq!(
            config.compaction_policy().unwrap(),
            CompactionPolicy::KeepRevisions(1000)
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let flags = Flags {
            initial_cluster_state: Some("sideways".into()),
            ..Default::default()
        };
        assert!(StoreConfig::load(&flags).is_err());
    }
}
