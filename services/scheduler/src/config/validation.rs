//! kube-scheduler's validation of its configuration, with kube's field paths.

use std::collections::HashSet;

use super::types::KubeSchedulerConfiguration;
use super::{FieldError, SchedulerConfig};

pub(super) fn validate_raw(raw: &KubeSchedulerConfiguration) -> Result<(), FieldError> {
    if let Some(parallelism) = raw.parallelism {
        if parallelism <= 0 {
            return Err(FieldError::new(
                "parallelism",
                format!(
                    "Invalid value: {parallelism}: should be an integer value greater than zero"
                ),
            ));
        }
    }
    check_percentage("percentageOfNodesToScore", raw.percentage_of_nodes_to_score)?;
    if let Some(initial) = raw.pod_initial_backoff_seconds {
        if initial <= 0 {
            return Err(FieldError::new(
                "podInitialBackoffSeconds",
                format!("Invalid value: {initial}: must be greater than 0"),
            ));
        }
    }
    let initial = raw
        .pod_initial_backoff_seconds
        .unwrap_or(super::defaults::DEFAULT_POD_INITIAL_BACKOFF_SECONDS);
    if let Some(max) = raw.pod_max_backoff_seconds {
        if max < initial {
            return Err(FieldError::new(
                "podMaxBackoffSeconds",
                format!("Invalid value: {max}: must be greater than or equal to PodInitialBackoffSeconds"),
            ));
        }
    }
    if raw.extenders.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(FieldError::new(
            "extenders",
            "Forbidden: scheduler extenders are not supported",
        ));
    }
    if let Some(lock) = raw
        .leader_election
        .as_ref()
        .and_then(|l| l.resource_lock.as_deref())
    {
        if lock != "leases" {
            return Err(FieldError::new(
                "leaderElection.resourceLock",
                format!("Unsupported value: {lock:?}: supported values: \"leases\""),
            ));
        }
    }
    for (i, profile) in raw.profiles.iter().flatten().enumerate() {
        check_percentage(
            &format!("profiles[{i}].percentageOfNodesToScore"),
            profile.percentage_of_nodes_to_score,
        )?;
        validate_plugin_config_names(i, profile)?;
    }
    Ok(())
}

fn check_percentage(field: &str, value: Option<i32>) -> Result<(), FieldError> {
    match value {
        Some(v) if !(0..=100).contains(&v) => Err(FieldError::new(
            field,
            format!("Invalid value: {v}: not in valid range [0-100]"),
        )),
        _ => Ok(()),
    }
}

fn validate_plugin_config_names(
    index: usize,
    profile: &super::types::KubeSchedulerProfile,
) -> Result<(), FieldError> {
    let mut seen = HashSet::new();
    for (j, config) in profile.plugin_config.iter().flatten().enumerate() {
        if !seen.insert(config.name.as_str()) {
            return Err(FieldError::new(
                format!("profiles[{index}].pluginConfig[{j}]"),
                format!("Duplicate value: {:?}", config.name),
            ));
        }
    }
    Ok(())
}

pub(super) fn validate_resolved(config: &SchedulerConfig) -> Result<(), FieldError> {
    let leader = &config.leader_election;
    if leader.leader_elect {
        if leader.lease_duration <= leader.renew_deadline {
            return Err(FieldError::new(
                "leaderElection.leaseDuration",
                "Invalid value: leaseDuration must be greater than renewDeadline",
            ));
        }
        if leader.retry_period.is_zero() || leader.renew_deadline <= leader.retry_period {
            return Err(FieldError::new(
                "leaderElection.renewDeadline",
                "Invalid value: renewDeadline must be greater than retryPeriod, which must be greater than zero",
            ));
        }
    }
    let mut names = HashSet::new();
    for profile in &config.profiles {
        let field = format!("profiles[{}].schedulerName", profile.index);
        if profile.scheduler_name.is_empty() {
            return Err(FieldError::new(field, "Required value"));
        }
        if !names.insert(profile.scheduler_name.as_str()) {
            return Err(FieldError::new(
                field,
                format!("Duplicate value: {:?}", profile.scheduler_name),
            ));
        }
        for plugin in profile
            .multi_point
            .enabled
            .iter()
            .chain(profile.points.values().flat_map(|s| &s.enabled))
        {
            if plugin.weight.is_some_and(|w| w < 0) {
                return Err(FieldError::new(
                    format!("profiles[{}].plugins", profile.index),
                    format!(
                        "Invalid value: {}: plugin {:?} weight must not be negative",
                        plugin.weight.unwrap_or(0),
                        plugin.name
                    ),
                ));
            }
        }
    }
    Ok(())
}
