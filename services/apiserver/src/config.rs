//! Configuration of an API server: defaults, then an optional file, then
//! `CAPSTAN_*` environment variables, then flags (kube-apiserver's names).

use std::path::PathBuf;

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
    /// Address to serve HTTP on.
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Port to serve HTTP on (0 picks a free one).
    #[arg(long)]
    pub port: Option<u16>,
    /// Key prefix of every object in the store.
    #[arg(long)]
    pub storage_prefix: Option<String>,
    /// Log filter (`info`, `debug`, `capstan_apiserver=debug`, ...).
    #[arg(long)]
    pub log_level: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ApiserverConfig {
    pub etcd_servers: String,
    pub bind_address: String,
    pub port: u16,
    pub storage_prefix: String,
    pub log_level: String,
}

pub use capstan_telemetry::settings::ConfigError;

impl ApiserverConfig {
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let defaults = config::Config::builder()
            .set_default("etcd_servers", "http://127.0.0.1:2379")?
            .set_default("bind_address", "127.0.0.1")?
            .set_default("port", 8080)?
            .set_default("storage_prefix", "/registry")?
            .set_default("log_level", "info")?;
        let overrides = [
            ("etcd_servers", flags.etcd_servers.clone()),
            ("bind_address", flags.bind_address.clone()),
            ("port", flags.port.map(|p| p.to_string())),
            ("storage_prefix", flags.storage_prefix.clone()),
            ("log_level", flags.log_level.clone()),
        ];
        let config: ApiserverConfig = capstan_telemetry::settings::load_layered(
            defaults,
            flags.config_file.as_deref(),
            &overrides,
        )?;
        config.validate()?;
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
        Ok(())
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.etcd_servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_defaults() {
        let flags = Flags {
            etcd_servers: Some("http://a:1, http://b:2".into()),
            port: Some(9),
            ..Default::default()
        };
        let config = ApiserverConfig::load(&flags).unwrap();
        assert_eq!(config.endpoints(), vec!["http://a:1", "http://b:2"]);
        assert_eq!(config.port, 9);
        assert_eq!(config.storage_prefix, "/registry");
    }

    #[test]
    fn bad_prefix_is_refused() {
        let flags = Flags {
            storage_prefix: Some("registry/".into()),
            ..Default::default()
        };
        assert!(ApiserverConfig::load(&flags).is_err());
    }
}
