//! `capstan-scheduler`'s flags, with kube-scheduler's names, layered by the
//! config crate (defaults, `CAPSTAN_*` environment variables, flags) and
//! applied over the KubeSchedulerConfiguration file given with `--config`.

use std::path::PathBuf;
use std::time::Duration;

use capstan_client::flags::{ConnectionFlags, LeaderElectionFlags};
use clap::Parser;
use serde::Deserialize;
use thiserror::Error;

use crate::config::{self, ConfigError, SchedulerConfig};

#[derive(Debug, Parser)]
#[command(
    name = "capstan-scheduler",
    version,
    about = "kube-scheduler's default profile as an API client"
)]
pub struct Flags {
    #[command(flatten)]
    pub connection: ConnectionFlags,
    #[command(flatten)]
    pub election: LeaderElectionFlags,
    /// A KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Port of /healthz, /readyz and /metrics.
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// Address of that port.
    #[arg(long)]
    pub bind_address: Option<String>,
    /// Log filter (`info`, `warn`, `capstan_scheduler=debug`, ...), as the
    /// other components take it.
    #[arg(long)]
    pub log_level: Option<String>,
}

/// The flags after layering.
#[derive(Debug, Clone, Deserialize)]
pub struct Options {
    pub kubeconfig: Option<String>,
    pub config: Option<PathBuf>,
    pub leader_elect: Option<bool>,
    pub leader_elect_lease_duration: Option<String>,
    pub leader_elect_renew_deadline: Option<String>,
    pub leader_elect_retry_period: Option<String>,
    pub leader_elect_resource_name: Option<String>,
    pub leader_elect_resource_namespace: Option<String>,
    pub kube_api_qps: Option<f32>,
    pub kube_api_burst: Option<u32>,
    pub secure_port: u16,
    pub bind_address: String,
    pub log_level: String,
}

#[derive(Debug, Error)]
pub enum OptionsError {
    #[error(transparent)]
    Layers(#[from] capstan_telemetry::settings::ConfigError),
    #[error(transparent)]
    File(#[from] ConfigError),
    #[error("--{flag}: {message}")]
    Flag { flag: &'static str, message: String },
}

impl Options {
    pub fn load(flags: &Flags) -> Result<Options, OptionsError> {
        let defaults = ::config::Config::builder()
            .set_default("secure_port", 10259)
            .and_then(|b| b.set_default("bind_address", "127.0.0.1"))
            .and_then(|b| b.set_default("log_level", "info"))
            .map_err(capstan_telemetry::settings::ConfigError::from)?;
        let own = vec![
            (
                "config",
                flags.config.as_ref().map(|p| p.display().to_string()),
            ),
            ("secure_port", flags.secure_port.map(|v| v.to_string())),
            ("bind_address", flags.bind_address.clone()),
            ("log_level", flags.log_level.clone()),
        ];
        let overrides = [
            flags.connection.overrides(),
            flags.election.overrides(),
            own,
        ]
        .concat();
        Ok(capstan_telemetry::settings::load_layered(
            defaults, None, &overrides,
        )?)
    }

    /// The configuration file (or kube's defaults) with these flags over it.
    pub fn scheduler_config(&self) -> Result<SchedulerConfig, OptionsError> {
        let mut config = match &self.config {
            Some(path) => config::load(path)?,
            None => SchedulerConfig::default(),
        };
        if self.kubeconfig.is_some() {
            config.kubeconfig = self.kubeconfig.clone();
        }
        if let Some(qps) = self.kube_api_qps {
            config.qps = qps;
        }
        if let Some(burst) = self.kube_api_burst {
            config.burst = burst as i32;
        }
        let leader = &mut config.leader_election;
        if let Some(elect) = self.leader_elect {
            leader.leader_elect = elect;
        }
        let duration = |flag: &'static str,
                        value: &Option<String>,
                        target: &mut Duration|
         -> Result<(), OptionsError> {
            if let Some(text) = value {
                *target = humantime::parse_duration(text).map_err(|e| OptionsError::Flag {
                    flag,
                    message: format!("{text:?}: {e}"),
                })?;
            }
            Ok(())
        };
        duration(
            "leader-elect-lease-duration",
            &self.leader_elect_lease_duration,
            &mut leader.lease_duration,
        )?;
        duration(
            "leader-elect-renew-deadline",
            &self.leader_elect_renew_deadline,
            &mut leader.renew_deadline,
        )?;
        duration(
            "leader-elect-retry-period",
            &self.leader_elect_retry_period,
            &mut leader.retry_period,
        )?;
        if let Some(name) = &self.leader_elect_resource_name {
            leader.resource_name = name.clone();
        }
        if let Some(namespace) = &self.leader_elect_resource_namespace {
            leader.resource_namespace = namespace.clone();
        }
        if leader.leader_elect && leader.lease_duration <= leader.renew_deadline {
            return Err(OptionsError::Flag {
                flag: "leader-elect-lease-duration",
                message: "must be greater than --leader-elect-renew-deadline".into(),
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_defaults_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: true\nclientConnection:\n  qps: 20\n",
        )
        .unwrap();
        let flags = Flags::parse_from([
            "capstan-scheduler",
            "--config",
            path.to_str().unwrap(),
            "--leader-elect",
            "false",
            "--kube-api-burst",
            "7",
        ]);
        let options = Options::load(&flags).unwrap();
        assert_eq!(options.secure_port, 10259);
        let config = options.scheduler_config().unwrap();
        assert!(!config.leader_election.leader_elect);
        assert_eq!(config.qps, 20.0);
        assert_eq!(config.burst, 7);
    }

    #[test]
    fn a_malformed_file_is_named_with_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  percentageOfNodesToScore: 300\n").unwrap();
        let flags = Flags::parse_from(["capstan-scheduler", "--config", path.to_str().unwrap()]);
        let error = Options::load(&flags)
            .unwrap()
            .scheduler_config()
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!("{}: profiles[0].percentageOfNodesToScore: Invalid value: 300: not in valid range [0-100]", path.display())
        );
    }
}
