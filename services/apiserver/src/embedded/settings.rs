//! The flags of the embedded components (k3s's names and
//! kube-scheduler's), layered as the API server's own, and the scheduler's
//! configuration file read and checked at start.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use capstan_telemetry::settings::ConfigError;

#[derive(Debug, Default, Clone, clap::Args)]
pub struct EmbeddedFlags {
    /// Do not run kube-controller-manager's loops in this process (run
    /// `capstan-controller-manager` apart instead); k3s's flag.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub disable_controller_manager: Option<bool>,
    /// Credentials for the in-process controller manager; by default a
    /// client certificate signed with the client CA's key
    /// (`client-ca.key` beside `--client-ca-file`).
    #[arg(long)]
    pub controller_manager_kubeconfig: Option<String>,
    /// Test-only failpoint of the in-process controller manager: its
    /// watch events reach its caches this late (`2s`, or `pods=2s` for one
    /// resource). Never in production.
    #[arg(long)]
    pub experimental_controller_watch_delay: Option<String>,
    /// Do not run kube-scheduler in this process (run `capstan-scheduler`
    /// apart instead); k3s's flag.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub disable_scheduler: Option<bool>,
    /// The in-process scheduler's KubeSchedulerConfiguration file
    /// (kube-scheduler's `--config`); a malformed one stops start-up.
    #[arg(long)]
    pub scheduler_config: Option<String>,
    /// Credentials for the in-process scheduler; by default a client
    /// certificate as `system:kube-scheduler` signed with the client CA's key.
    #[arg(long)]
    pub scheduler_kubeconfig: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct Settings {
    pub disable_controller_manager: bool,
    pub controller_manager_kubeconfig: String,
    pub experimental_controller_watch_delay: String,
    pub disable_scheduler: bool,
    pub scheduler_config: String,
    pub scheduler_kubeconfig: String,
    /// `scheduler_config` read and validated at start.
    #[serde(skip)]
    pub scheduler: Option<capstan_scheduler::config::SchedulerConfig>,
}

impl Settings {
    pub fn load(flags: &EmbeddedFlags, file: Option<&Path>) -> Result<Settings, ConfigError> {
        let defaults = config::Config::builder()
            .set_default("disable_controller_manager", false)?
            .set_default("controller_manager_kubeconfig", "")?
            .set_default("experimental_controller_watch_delay", "")?
            .set_default("disable_scheduler", false)?
            .set_default("scheduler_config", "")?
            .set_default("scheduler_kubeconfig", "")?;
        let overrides = [
            (
                "disable_controller_manager",
                flags.disable_controller_manager.map(|b| b.to_string()),
            ),
            (
                "controller_manager_kubeconfig",
                flags.controller_manager_kubeconfig.clone(),
            ),
            (
                "experimental_controller_watch_delay",
                flags.experimental_controller_watch_delay.clone(),
            ),
            (
                "disable_scheduler",
                flags.disable_scheduler.map(|b| b.to_string()),
            ),
            ("scheduler_config", flags.scheduler_config.clone()),
            ("scheduler_kubeconfig", flags.scheduler_kubeconfig.clone()),
        ];
        let mut settings: Settings =
            capstan_telemetry::settings::load_layered(defaults, file, &overrides)?;
        if !settings.disable_scheduler {
            let path = (!settings.scheduler_config.is_empty())
                .then(|| PathBuf::from(&settings.scheduler_config));
            let loaded =
                capstan_scheduler::embed::load_config(path.as_deref()).map_err(|reason| {
                    ConfigError::Invalid {
                        field: "scheduler_config",
                        reason,
                    }
                })?;
            settings.scheduler = Some(loaded);
        }
        Ok(settings)
    }
}
