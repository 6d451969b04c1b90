//! The scheduler's configuration: kube's KubeSchedulerConfiguration file
//! (`--config`), defaulted and validated as kube-scheduler does. A malformed
//! file stops start-up with an error naming the file and the field.

pub mod defaults;
pub mod types;
mod validation;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use thiserror::Error;

pub use defaults::{ExtensionPoint, MergedSet};
pub use types::KubeSchedulerConfiguration;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Decode { file: String, message: String },
    #[error("{file}: {field}: {message}")]
    Invalid {
        file: String,
        field: String,
        message: String,
    },
}

/// A field that failed validation, before the file name is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn in_file(self, file: &str) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_string(),
            field: self.field,
            message: self.message,
        }
    }
}

/// Leader election settings (kube's component-base defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct LeaderElection {
    pub leader_elect: bool,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub resource_name: String,
    pub resource_namespace: String,
}

/// One profile: a scheduler name and its plugin sets, merged with the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileConfig {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub multi_point: MergedSet,
    pub points: BTreeMap<ExtensionPoint, MergedSet>,
    /// Plugin arguments by plugin name, with their index in `pluginConfig` (for error paths).
    pub plugin_args: BTreeMap<String, (usize, serde_json::Value)>,
    /// This profile's index in `profiles`, for error paths.
    pub index: usize,
}

/// The defaulted, validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    pub parallelism: i32,
    /// 0 means kube's adaptive percentage.
    pub percentage_of_nodes_to_score: i32,
    pub pod_initial_backoff: Duration,
    pub pod_max_backoff: Duration,
    pub leader_election: LeaderElection,
    pub kubeconfig: Option<String>,
    pub qps: f32,
    pub burst: i32,
    pub profiles: Vec<ProfileConfig>,
}

impl Default for SchedulerConfig {
    fn default() -> SchedulerConfig {
        resolve(KubeSchedulerConfiguration::default()).expect("the defaults are valid")
    }
}

/// Reads, defaults and validates the file at `path`.
pub fn load(path: &Path) -> Result<SchedulerConfig, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    parse(&text).map_err(|error| match error {
        ParseError::Decode(message) => ConfigError::Decode { file, message },
        ParseError::Field(field) => field.in_file(&file),
    })
}

#[derive(Debug)]
pub enum ParseError {
    Decode(String),
    Field(FieldError),
}

/// Parses the text of a configuration file (YAML or JSON).
pub fn parse(text: &str) -> Result<SchedulerConfig, ParseError> {
    let raw: KubeSchedulerConfiguration = serde_yaml::from_str(text)
        .map_err(|e| ParseError::Decode(format!("strict decoding error: {e}")))?;
    match raw.api_version.as_deref() {
        None => {
            return Err(ParseError::Field(FieldError::new(
                "apiVersion",
                "Object 'apiVersion' is missing",
            )))
        }
        Some(types::API_VERSION) => {}
        Some(other) => {
            return Err(ParseError::Field(FieldError::new(
                "apiVersion",
                format!(
                    "Unsupported value: {other:?}: supported values: {:?}",
                    types::API_VERSION
                ),
            )))
        }
    }
    match raw.kind.as_deref() {
        Some(types::KIND) => {}
        None => {
            return Err(ParseError::Field(FieldError::new(
                "kind",
                "Object 'Kind' is missing",
            )))
        }
        Some(other) => {
            return Err(ParseError::Field(FieldError::new(
                "kind",
                format!(
                    "Unsupported value: {other:?}: supported values: {:?}",
                    types::KIND
                ),
            )))
        }
    }
    resolve(raw).map_err(ParseError::Field)
}

/// Applies kube's defaults to `raw` and validates the result.
pub fn resolve(raw: KubeSchedulerConfiguration) -> Result<SchedulerConfig, FieldError> {
    validation::validate_raw(&raw)?;
    let leader = raw.leader_election.clone().unwrap_or_default();
    let client = raw.client_connection.clone().unwrap_or_default();
    let duration = |field: &str, value: &Option<String>, default: u64| match value {
        None => Ok(Duration::from_secs(default)),
        Some(text) => humantime::parse_duration(text).map_err(|e| {
            FieldError::new(
                format!("leaderElection.{field}"),
                format!("Invalid value: {text:?}: {e}"),
            )
        }),
    };
    let config = SchedulerConfig {
        parallelism: raw.parallelism.unwrap_or(defaults::DEFAULT_PARALLELISM),
        percentage_of_nodes_to_score: raw.percentage_of_nodes_to_score.unwrap_or(0),
        pod_initial_backoff: Duration::from_secs(
            raw.pod_initial_backoff_seconds
                .unwrap_or(defaults::DEFAULT_POD_INITIAL_BACKOFF_SECONDS) as u64,
        ),
        pod_max_backoff: Duration::from_secs(
            raw.pod_max_backoff_seconds
                .unwrap_or(defaults::DEFAULT_POD_MAX_BACKOFF_SECONDS) as u64,
        ),
        leader_election: LeaderElection {
            leader_elect: leader.leader_elect.unwrap_or(true),
            lease_duration: duration("leaseDuration", &leader.lease_duration, 15)?,
            renew_deadline: duration("renewDeadline", &leader.renew_deadline, 10)?,
            retry_period: duration("retryPeriod", &leader.retry_period, 2)?,
            resource_name: leader
                .resource_name
                .clone()
                .unwrap_or_else(|| defaults::DEFAULT_LEASE_NAME.into()),
            resource_namespace: leader
                .resource_namespace
                .clone()
                .unwrap_or_else(|| defaults::DEFAULT_LEASE_NAMESPACE.into()),
        },
        kubeconfig: client.kubeconfig.clone().filter(|k| !k.is_empty()),
        qps: client
            .qps
            .filter(|q| *q != 0.0)
            .unwrap_or(defaults::DEFAULT_QPS),
        burst: client
            .burst
            .filter(|b| *b != 0)
            .unwrap_or(defaults::DEFAULT_BURST),
        profiles: resolve_profiles(&raw),
    };
    validation::validate_resolved(&config)?;
    Ok(config)
}

fn resolve_profiles(raw: &KubeSchedulerConfiguration) -> Vec<ProfileConfig> {
    let mut profiles = raw.profiles.clone().unwrap_or_default();
    if profiles.is_empty() {
        profiles.push(types::KubeSchedulerProfile::default());
    }
    let single = profiles.len() == 1;
    profiles
        .iter()
        .enumerate()
        .map(|(index, profile)| {
            let plugins = profile.plugins.clone().unwrap_or_default();
            let points = ExtensionPoint::ALL
                .iter()
                .map(|point| (*point, defaults::merge_set(&[], point.set_of(&plugins))))
                .collect();
            ProfileConfig {
                scheduler_name: profile
                    .scheduler_name
                    .clone()
                    .or_else(|| single.then(|| defaults::DEFAULT_SCHEDULER_NAME.to_string()))
                    .unwrap_or_default(),
                percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
                multi_point: defaults::merge_set(
                    &defaults::default_multi_point(),
                    plugins.multi_point.as_ref(),
                ),
                points,
                plugin_args: profile
                    .plugin_config
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, c)| {
                        (
                            c.name.clone(),
                            (i, c.args.clone().unwrap_or(serde_json::Value::Null)),
                        )
                    })
                    .collect(),
                index,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
