//! The checks a loaded configuration must pass before anything starts:
//! each refusal names the setting.

use capstan_telemetry::settings::ConfigError;

use super::{duration, invalid, parse_duration, Settings};

impl Settings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
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
}
