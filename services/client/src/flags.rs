//! The flags every component that is an API client takes, with kube's
//! names: how it connects (`--kubeconfig`, `--kube-api-qps`,
//! `--kube-api-burst`) and how it leader-elects (`--leader-elect*`). A
//! component flattens them into its own clap flags and layers them with
//! the config crate under the same keys (dashes as underscores); unset
//! flags yield nothing, so they fall through to the lower layers.

use std::path::PathBuf;

/// `--kubeconfig`, `--kube-api-qps`, `--kube-api-burst`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ConnectionFlags {
    /// The kubeconfig with the API server's address and this component's
    /// credentials.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Requests per second to the API, per client (`<= 0`: unlimited).
    #[arg(long)]
    pub kube_api_qps: Option<f32>,
    /// Requests that may go at once after a quiet spell.
    #[arg(long)]
    pub kube_api_burst: Option<u32>,
}

impl ConnectionFlags {
    /// The set flags as config-crate overrides.
    pub fn overrides(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            (
                "kubeconfig",
                self.kubeconfig.as_ref().map(|p| p.display().to_string()),
            ),
            ("kube_api_qps", text(&self.kube_api_qps)),
            ("kube_api_burst", text(&self.kube_api_burst)),
        ]
    }
}

/// `--leader-elect` and the Lease's name and timings.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct LeaderElectionFlags {
    /// Work only while holding the component's Lease (kube's default: true).
    #[arg(long)]
    pub leader_elect: Option<bool>,
    /// How long others wait after the last renewal before taking the Lease.
    #[arg(long)]
    pub leader_elect_lease_duration: Option<String>,
    /// How long the leader tries to renew before giving up leading.
    #[arg(long)]
    pub leader_elect_renew_deadline: Option<String>,
    /// How often candidates try to take, and the leader to renew, the Lease.
    #[arg(long)]
    pub leader_elect_retry_period: Option<String>,
    /// The Lease's namespace.
    #[arg(long)]
    pub leader_elect_resource_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
}

impl LeaderElectionFlags {
    /// The set flags as config-crate overrides.
    pub fn overrides(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            ("leader_elect", text(&self.leader_elect)),
            (
                "leader_elect_lease_duration",
                self.leader_elect_lease_duration.clone(),
            ),
            (
                "leader_elect_renew_deadline",
                self.leader_elect_renew_deadline.clone(),
            ),
            (
                "leader_elect_retry_period",
                self.leader_elect_retry_period.clone(),
            ),
            (
                "leader_elect_resource_namespace",
                self.leader_elect_resource_namespace.clone(),
            ),
            (
                "leader_elect_resource_name",
                self.leader_elect_resource_name.clone(),
            ),
        ]
    }
}

fn text<T: ToString>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(T::to_string)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Component {
        #[command(flatten)]
        connection: ConnectionFlags,
        #[command(flatten)]
        election: LeaderElectionFlags,
    }

    #[test]
    fn kubes_flag_names_and_only_set_ones_override() {
        let parsed = Component::parse_from([
            "component",
            "--kubeconfig",
            "/etc/kubeconfig",
            "--kube-api-burst",
            "7",
            "--leader-elect",
            "false",
            "--leader-elect-resource-name",
            "lock",
        ]);
        let set: Vec<_> = [parsed.connection.overrides(), parsed.election.overrides()]
            .concat()
            .into_iter()
            .filter_map(|(key, value)| Some((key, value?)))
            .collect();
        assert_eq!(
            set,
            [
                ("kubeconfig", "/etc/kubeconfig".to_string()),
                ("kube_api_burst", "7".into()),
                ("leader_elect", "false".into()),
                ("leader_elect_resource_name", "lock".into()),
            ]
        );
    }
}
