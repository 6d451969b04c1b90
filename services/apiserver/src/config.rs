//! Configuration of an API server: defaults, then an optional file, then
//! `CAPSTAN_*` environment variables, then flags (kube-apiserver's names).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

#[derive(Debug, Default, Clone, Parser)]
#[command(
    name = "capstan-apiserver",
    version,
    about = "Kubernetes API server over an etcd v3 store"
)]
pub struct Flags {
    /// A TOML file with any of the settings below (underscores for dashes).
    #[arg(long)]
    pub config_file: Option<PathBuf>,
    /// Comma-separated etcd v3 client URLs (capstan-store or etcd 3.4+).
    #[arg(long)]
    pub etcd_servers: Option<String>,
    /// Address to serve HTTPS on.
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Port to serve HTTPS on (6443; 0 turns HTTPS off).
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// Port to serve plain HTTP on, on 127.0.0.1 only, for development
    /// (kube-apiserver's old insecure port: whoever reaches it is
    /// `system:unsecured` in `system:masters`). 0, the default, is off.
    #[arg(long)]
    pub insecure_port: Option<u16>,
    /// Address of the insecure port: 127.0.0.1 unless set on purpose
    /// (compose.yaml does, behind its private network, for now).
    #[arg(long)]
    pub insecure_bind_address: Option<String>,
    /// The serving certificate (PEM, leaf first).
    #[arg(long)]
    pub tls_cert_file: Option<String>,
    /// The serving certificate's private key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<String>,
    /// CA bundle (PEM) that signs client certificates: a request with a
    /// certificate it signed is the certificate's CN, in its O groups.
    #[arg(long)]
    pub client_ca_file: Option<String>,
    /// The `iss` of the service-account tokens this server issues.
    #[arg(long)]
    pub service_account_issuer: Option<String>,
    /// Comma-separated PEM files of public (or private) keys that verify
    /// service-account tokens (the signing key's public half is added).
    #[arg(long)]
    pub service_account_key_file: Option<String>,
    /// The private key (PEM) that signs service-account tokens.
    #[arg(long)]
    pub service_account_signing_key_file: Option<String>,
    /// Comma-separated audiences a token must be for (default: the issuer).
    #[arg(long)]
    pub api_audiences: Option<String>,
    /// Requests without credentials are `system:anonymous` (true) or 401.
    #[arg(long)]
    pub anonymous_auth: Option<bool>,
    /// Key prefix of every object in the store.
    #[arg(long)]
    pub storage_prefix: Option<String>,
    /// Log filter (`info`, `debug`, `capstan_apiserver=debug`, ...).
    #[arg(long)]
    pub log_level: Option<String>,
    /// How often to compact the store's history (`5m`, `30s`; `0` turns
    /// compaction off). API servers sharing a store compact once per
    /// interval between them.
    #[arg(long)]
    pub etcd_compaction_interval: Option<String>,
    /// How long events live in the store (`1h`; kube-apiserver's default).
    #[arg(long)]
    pub event_ttl: Option<String>,
    /// CA (PEM) that the store's serving certificate is checked against
    /// (the store is then reached over https://).
    #[arg(long)]
    pub etcd_cafile: Option<String>,
    /// Client certificate (PEM) presented to the store.
    #[arg(long)]
    pub etcd_certfile: Option<String>,
    /// Private key (PEM) of --etcd-certfile.
    #[arg(long)]
    pub etcd_keyfile: Option<String>,
    /// Comma list of authorizers asked in order: `RBAC`, `AlwaysAllow`,
    /// `AlwaysDeny` (kube-apiserver's names; `Node` is not served).
    #[arg(long)]
    pub authorization_mode: Option<String>,
    /// kube-apiserver's static token CSV: `token,user,uid,"group1,group2"`.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Comma list of admission plugins to run besides the default set
    /// (kube's names; only those this server implements).
    #[arg(long)]
    pub enable_admission_plugins: Option<String>,
    /// Comma list of admission plugins of the default set not to run.
    #[arg(long)]
    pub disable_admission_plugins: Option<String>,
    /// kube's AdmissionConfiguration file: the plugins' own settings
    /// (PodSecurity's defaults and exemptions).
    #[arg(long)]
    pub admission_control_config_file: Option<String>,
    /// DefaultTolerationSeconds: how long pods tolerate a not-ready node (300).
    #[arg(long)]
    pub default_not_ready_toleration_seconds: Option<i64>,
    /// DefaultTolerationSeconds: how long pods tolerate an unreachable node (300).
    #[arg(long)]
    pub default_unreachable_toleration_seconds: Option<i64>,
    /// The cluster's CA (PEM), published to every namespace as the
    /// `kube-root-ca.crt` ConfigMap (kube-controller-manager's flag).
    #[arg(long)]
    pub root_ca_file: Option<String>,
    /// The audit policy (an audit.k8s.io/v1 Policy, YAML or JSON); with
    /// --audit-log-path, requests are audited as it says.
    #[arg(long)]
    pub audit_policy_file: Option<String>,
    /// Where audit events go as JSON lines (`-`: standard output).
    #[arg(long)]
    pub audit_log_path: Option<String>,
    /// Megabytes of audit log before it is rotated (0: never).
    #[arg(long)]
    pub audit_log_maxsize: Option<u64>,
    /// Rotated audit logs kept (0: all).
    #[arg(long)]
    pub audit_log_maxbackup: Option<usize>,
    /// Days a rotated audit log is kept (0: no limit).
    #[arg(long)]
    pub audit_log_maxage: Option<u64>,
    /// Reads served at once before 429s (400; 0: no limit).
    #[arg(long)]
    pub max_requests_inflight: Option<usize>,
    /// Writes served at once before 429s (200; 0: no limit).
    #[arg(long)]
    pub max_mutating_requests_inflight: Option<usize>,
    /// Watches one user may hold open before 429s (1000; 0: no limit).
    #[arg(long)]
    pub max_watches_per_user: Option<usize>,
    /// kube's EncryptionConfiguration (YAML or JSON): which resources are
    /// encrypted at rest, and with which providers and keys.
    #[arg(long)]
    pub encryption_provider_config: Option<String>,
    #[command(flatten)]
    pub aggregator: crate::aggregator::settings::AggregatorFlags,
    #[command(flatten)]
    pub kubelet: crate::kubelet_client::settings::KubeletFlags,
    #[command(flatten)]
    pub embedded: crate::embedded::settings::EmbeddedFlags,
}

/// kube-apiserver's usual mode; `AlwaysAllow` is for development only.
pub const DEFAULT_AUTHORIZATION_MODE: &str = "Node,RBAC";

#[derive(Debug, Clone, Deserialize)]
pub struct ApiserverConfig {
    pub etcd_servers: String,
    pub bind_address: String,
    pub secure_port: u16,
    pub insecure_port: u16,
    pub insecure_bind_address: String,
    pub tls_cert_file: String,
    pub tls_private_key_file: String,
    pub client_ca_file: String,
    pub service_account_issuer: String,
    pub service_account_key_file: String,
    pub service_account_signing_key_file: String,
    pub api_audiences: String,
    pub anonymous_auth: bool,
    pub storage_prefix: String,
    pub log_level: String,
    pub etcd_compaction_interval: String,
    pub event_ttl: String,
    pub etcd_cafile: String,
    pub etcd_certfile: String,
    pub etcd_keyfile: String,
    pub authorization_mode: String,
    #[serde(default)]
    pub token_auth_file: Option<PathBuf>,
    pub enable_admission_plugins: String,
    pub disable_admission_plugins: String,
    pub admission_control_config_file: String,
    pub default_not_ready_toleration_seconds: i64,
    pub default_unreachable_toleration_seconds: i64,
    pub root_ca_file: String,
    pub audit_policy_file: String,
    pub audit_log_path: String,
    pub audit_log_maxsize: u64,
    pub audit_log_maxbackup: usize,
    pub audit_log_maxage: u64,
    pub max_requests_inflight: usize,
    pub max_mutating_requests_inflight: usize,
    pub max_watches_per_user: usize,
    pub encryption_provider_config: String,
    /// The front-proxy and requestheader flags (`crate::aggregator`).
    #[serde(skip)]
    pub aggregator: crate::aggregator::settings::Settings,
    /// How kubelets are reached (`crate::kubelet_client`).
    #[serde(skip)]
    pub kubelet: crate::kubelet_client::settings::Settings,
    /// What runs in this process besides the API (the `embedded` folder).
    #[serde(skip)]
    pub embedded: crate::embedded::settings::Settings,
}

pub use capstan_telemetry::settings::ConfigError;

/// kube-apiserver's usual issuer (what kubeadm and k3s set).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

impl ApiserverConfig {
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let file = flags.config_file.as_deref();
        let mut config: ApiserverConfig =
            capstan_telemetry::settings::load_layered(defaults()?, file, &flags.overrides())?;
        config.aggregator = crate::aggregator::settings::Settings::load(&flags.aggregator, file)?;
        config.embedded = crate::embedded::settings::Settings::load(&flags.embedded, file)?;
        config.kubelet = crate::kubelet_client::settings::Settings::load(&flags.kubelet, file)?;
        config.validate()?;
        config.etcd_tls()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.endpoints().is_empty() {
            return Err(ConfigError::Invalid {
                field: "etcd_servers",
                reason: "at least one URL is needed".into(),
            });
        }
        if !self.storage_prefix.starts_with('/') || self.storage_prefix.ends_with('/') {
            return Err(ConfigError::Invalid {
                field: "storage_prefix",
                reason: "must start with '/' and not end with one".into(),
            });
        }
        self.validate_serving()?;
        parse_interval(&self.etcd_compaction_interval).ok_or_else(|| ConfigError::Invalid {
            field: "etcd_compaction_interval",
            reason: "not a duration (such as 5m or 30s; 0 turns compaction off)".into(),
        })?;
        crate::auth::parse_modes(&self.authorization_mode).map_err(|reason| {
            ConfigError::Invalid {
                field: "authorization_mode",
                reason,
            }
        })?;
        self.admission_plugins()?;
        match parse_interval(&self.event_ttl) {
            Some(ttl) if ttl >= Duration::from_secs(1) => Ok(()),
            _ => Err(ConfigError::Invalid {
                field: "event_ttl",
                reason: "not a duration of at least a second (such as 1h or 30m)".into(),
            }),
        }
    }

    /// HTTPS needs a certificate and a key; plain HTTP is never the only
    /// way in by accident.
    fn validate_serving(&self) -> Result<(), ConfigError> {
        let tls = !self.tls_cert_file.is_empty() && !self.tls_private_key_file.is_empty();
        if self.secure_port != 0 && !tls {
            return Err(ConfigError::Invalid {
                field: "tls_cert_file",
                reason: "--tls-cert-file and --tls-private-key-file are needed to serve HTTPS \
                         (or --secure-port 0 with --insecure-port for plain HTTP on loopback)"
                    .into(),
            });
        }
        if self.secure_port == 0 && self.insecure_port == 0 {
            return Err(ConfigError::Invalid {
                field: "secure_port",
                reason: "nothing to serve on: both --secure-port and --insecure-port are 0".into(),
            });
        }
        Ok(())
    }

    /// The admission plugins to run, in kube's order.
    pub fn admission_plugins(&self) -> Result<Vec<&'static str>, ConfigError> {
        let enable = split_list(&self.enable_admission_plugins);
        let disable = split_list(&self.disable_admission_plugins);
        crate::admission::plugins::select(&enable, &disable).map_err(|reason| {
            ConfigError::Invalid {
                field: "enable_admission_plugins",
                reason,
            }
        })
    }

    /// The audiences tokens must be for: `--api-audiences`, else the issuer.
    pub fn audiences(&self) -> Vec<String> {
        let listed = split_list(&self.api_audiences);
        match listed.is_empty() {
            true => vec![self.service_account_issuer.clone()],
            false => listed,
        }
    }

    /// The audit flags.
    pub fn audit(&self) -> crate::audit::Settings {
        crate::audit::Settings {
            policy_file: self.audit_policy_file.clone(),
            log_path: self.audit_log_path.clone(),
            max_size_mb: self.audit_log_maxsize,
            max_backups: self.audit_log_maxbackup,
            max_age_days: self.audit_log_maxage,
        }
    }

    /// The files of `--service-account-key-file`.
    pub fn service_account_key_files(&self) -> Vec<String> {
        split_list(&self.service_account_key_file)
    }

    /// How the store is reached over TLS (kube's `--etcd-cafile`,
    /// `--etcd-certfile`, `--etcd-keyfile`), or None for plain HTTP. A
    /// missing or malformed file is refused naming the flag and the file.
    pub fn etcd_tls(&self) -> Result<Option<etcd_client::TlsOptions>, ConfigError> {
        if self.etcd_certfile.is_empty() != self.etcd_keyfile.is_empty() {
            return Err(ConfigError::Invalid {
                field: "etcd_certfile",
                reason: "--etcd-certfile and --etcd-keyfile must be given together".into(),
            });
        }
        if self.etcd_cafile.is_empty() && self.etcd_certfile.is_empty() {
            return Ok(None);
        }
        let mut tls = etcd_client::TlsOptions::new();
        if !self.etcd_cafile.is_empty() {
            let ca = read_pem("etcd_cafile", &self.etcd_cafile)?;
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
        }
        if !self.etcd_certfile.is_empty() {
            let cert = read_pem("etcd_certfile", &self.etcd_certfile)?;
            let key = read_pem("etcd_keyfile", &self.etcd_keyfile)?;
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        Ok(Some(tls))
    }

    /// How long events live in the store.
    pub fn event_ttl(&self) -> Duration {
        parse_interval(&self.event_ttl).unwrap_or(Duration::from_secs(3600))
    }

    /// How often to compact the store, if at all.
    pub fn compaction_interval(&self) -> Option<Duration> {
        parse_interval(&self.etcd_compaction_interval).filter(|interval| !interval.is_zero())
    }

    pub fn endpoints(&self) -> Vec<String> {
        split_list(&self.etcd_servers)
    }
}

/// Every setting's default: kube-apiserver's where it has one.
fn defaults() -> Result<config::ConfigBuilder<config::builder::DefaultState>, ConfigError> {
    Ok(config::Config::builder()
        .set_default("etcd_servers", "http://127.0.0.1:2379")?
        .set_default("bind_address", "127.0.0.1")?
        .set_default("secure_port", 6443)?
        .set_default("insecure_port", 0)?
        .set_default("insecure_bind_address", "127.0.0.1")?
        .set_default("tls_cert_file", "")?
        .set_default("tls_private_key_file", "")?
        .set_default("client_ca_file", "")?
        .set_default("service_account_issuer", DEFAULT_ISSUER)?
        .set_default("service_account_key_file", "")?
        .set_default("service_account_signing_key_file", "")?
        .set_default("api_audiences", "")?
        .set_default("anonymous_auth", true)?
        .set_default("storage_prefix", "/registry")?
        .set_default("log_level", "info")?
        .set_default("etcd_compaction_interval", "5m")?
        .set_default("event_ttl", "1h")?
        .set_default("etcd_cafile", "")?
        .set_default("etcd_certfile", "")?
        .set_default("etcd_keyfile", "")?
        .set_default("authorization_mode", DEFAULT_AUTHORIZATION_MODE)?
        .set_default("enable_admission_plugins", "")?
        .set_default("disable_admission_plugins", "")?
        .set_default("admission_control_config_file", "")?
        .set_default("default_not_ready_toleration_seconds", 300)?
        .set_default("default_unreachable_toleration_seconds", 300)?
        .set_default("root_ca_file", "")?
        .set_default("audit_policy_file", "")?
        .set_default("audit_log_path", "")?
        .set_default("audit_log_maxsize", 0)?
        .set_default("audit_log_maxbackup", 0)?
        .set_default("audit_log_maxage", 0)?
        .set_default("max_requests_inflight", 400)?
        .set_default("max_mutating_requests_inflight", 200)?
        .set_default("max_watches_per_user", 1000)?
        .set_default("encryption_provider_config", "")?)
}

impl Flags {
    /// The settings the flags give (None: the flag was not set).
    fn overrides(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("etcd_servers", text(&self.etcd_servers)),
            ("bind_address", text(&self.bind_address)),
            ("secure_port", text(&self.secure_port)),
            ("insecure_port", text(&self.insecure_port)),
            ("insecure_bind_address", text(&self.insecure_bind_address)),
            ("tls_cert_file", text(&self.tls_cert_file)),
            ("tls_private_key_file", text(&self.tls_private_key_file)),
            ("client_ca_file", text(&self.client_ca_file)),
            ("service_account_issuer", text(&self.service_account_issuer)),
            (
                "service_account_key_file",
                text(&self.service_account_key_file),
            ),
            (
                "service_account_signing_key_file",
                text(&self.service_account_signing_key_file),
            ),
            ("api_audiences", text(&self.api_audiences)),
            ("anonymous_auth", text(&self.anonymous_auth)),
            ("storage_prefix", text(&self.storage_prefix)),
            ("log_level", text(&self.log_level)),
            (
                "etcd_compaction_interval",
                text(&self.etcd_compaction_interval),
            ),
            ("event_ttl", text(&self.event_ttl)),
            ("etcd_cafile", text(&self.etcd_cafile)),
            ("etcd_certfile", text(&self.etcd_certfile)),
            ("etcd_keyfile", text(&self.etcd_keyfile)),
            ("authorization_mode", text(&self.authorization_mode)),
            (
                "enable_admission_plugins",
                text(&self.enable_admission_plugins),
            ),
            (
                "disable_admission_plugins",
                text(&self.disable_admission_plugins),
            ),
            (
                "admission_control_config_file",
                text(&self.admission_control_config_file),
            ),
            (
                "default_not_ready_toleration_seconds",
                text(&self.default_not_ready_toleration_seconds),
            ),
            (
                "default_unreachable_toleration_seconds",
                text(&self.default_unreachable_toleration_seconds),
            ),
            ("root_ca_file", text(&self.root_ca_file)),
            (
                "token_auth_file",
                self.token_auth_file
                    .as_ref()
                    .map(|p| p.display().to_string()),
            ),
            ("audit_policy_file", text(&self.audit_policy_file)),
            ("audit_log_path", text(&self.audit_log_path)),
            ("audit_log_maxsize", text(&self.audit_log_maxsize)),
            ("audit_log_maxbackup", text(&self.audit_log_maxbackup)),
            ("audit_log_maxage", text(&self.audit_log_maxage)),
            ("max_requests_inflight", text(&self.max_requests_inflight)),
            (
                "max_mutating_requests_inflight",
                text(&self.max_mutating_requests_inflight),
            ),
            ("max_watches_per_user", text(&self.max_watches_per_user)),
            (
                "encryption_provider_config",
                text(&self.encryption_provider_config),
            ),
        ]
    }
}

/// A flag's value as the layered settings take it.
fn text<T: ToString>(flag: &Option<T>) -> Option<String> {
    flag.as_ref().map(ToString::to_string)
}

fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn read_pem(field: &'static str, path: &str) -> Result<Vec<u8>, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { field, reason };
    let bytes = std::fs::read(path).map_err(|err| invalid(format!("{path}: {err}")))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN") {
        return Err(invalid(format!("{path}: not a PEM file")));
    }
    Ok(bytes)
}

/// A duration as kube-apiserver's flags take them (`5m`, `1m30s`, `0`).
fn parse_interval(text: &str) -> Option<Duration> {
    match text.trim() {
        "0" => Some(Duration::ZERO),
        text => humantime::parse_duration(text).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_interval_defaults_to_five_minutes_and_zero_turns_it_off() {
        let config = ApiserverConfig::load(&plain()).unwrap();
        assert_eq!(config.compaction_interval(), Some(Duration::from_secs(300)));
        let off = Flags {
            etcd_compaction_interval: Some("0".into()),
            ..plain()
        };
        assert_eq!(
            ApiserverConfig::load(&off).unwrap().compaction_interval(),
            None
        );
        let bad = Flags {
            etcd_compaction_interval: Some("often".into()),
            ..plain()
        };
        assert!(ApiserverConfig::load(&bad).is_err());
    }

    #[test]
    fn flags_win_over_defaults() {
        let flags = Flags {
            etcd_servers: Some("http://a:1, http://b:2".into()),
            insecure_port: Some(9),
            ..plain()
        };
        let config = ApiserverConfig::load(&flags).unwrap();
        assert_eq!(config.endpoints(), vec!["http://a:1", "http://b:2"]);
        assert_eq!(config.insecure_port, 9);
        assert!(config.anonymous_auth);
        assert_eq!(config.audiences(), vec![DEFAULT_ISSUER]);
        assert_eq!(config.storage_prefix, "/registry");
    }

    /// Plain HTTP on loopback only, as the tests of other settings use.
    fn plain() -> Flags {
        Flags {
            secure_port: Some(0),
            insecure_port: Some(8080),
            ..Default::default()
        }
    }

    #[test]
    fn https_needs_a_certificate_and_something_must_be_served() {
        assert!(ApiserverConfig::load(&Flags::default()).is_err());
        let nothing = Flags {
            insecure_port: Some(0),
            ..plain()
        };
        assert!(ApiserverConfig::load(&nothing).is_err());
        let tls = Flags {
            tls_cert_file: Some("serving.crt".into()),
            tls_private_key_file: Some("serving.key".into()),
            api_audiences: Some("a, b".into()),
            ..Default::default()
        };
        let config = ApiserverConfig::load(&tls).unwrap();
        assert_eq!((config.secure_port, config.insecure_port), (6443, 0));
        assert_eq!(config.audiences(), vec!["a", "b"]);
    }

    #[test]
    fn bad_prefix_is_refused() {
        let flags = Flags {
            storage_prefix: Some("registry/".into()),
            ..plain()
        };
        assert!(ApiserverConfig::load(&flags).is_err());
    }
}
