//! The configuration parsed into what the process runs with. Every bad
//! value stops start-up with the flag's name and what was expected.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use capstan_client::connect::ClientSettings;
use k8s_openapi::api::core::v1::Taint;

use crate::config::{ConfigError, NodesConfig};
use crate::node::cidr::ClusterCidr;
use crate::node::template::NodeTemplate;
use crate::quantity::{self, Amounts};

/// Everything `run` needs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub client: ClientSettings,
    pub nodes: usize,
    pub template: NodeTemplate,
    pub cluster_cidr: ClusterCidr,
    pub tls: TlsFiles,
    pub register_metrics_api: bool,
    pub healthz_address: String,
    pub pod_run_duration: Duration,
    /// Lease renewals in flight at once.
    pub node_lease_parallelism: usize,
}

/// Certificate files given by flags (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    pub client_ca: Option<PathBuf>,
    pub metrics_ca: Option<PathBuf>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        reason: reason.into(),
    }
}

fn file(text: &str) -> Option<PathBuf> {
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// The most nodes one process simulates: more is a typo, and the pod
/// CIDRs of a /9 run out at 32,768 anyway.
const MOST_NODES: usize = 100_000;

impl Settings {
    pub fn parse(config: &NodesConfig) -> Result<Settings, ConfigError> {
        if config.nodes > MOST_NODES {
            return Err(invalid("nodes", format!("at most {MOST_NODES}")));
        }
        let address: IpAddr = config
            .node_ip
            .parse()
            .map_err(|_| invalid("node_ip", "must be an IP address"))?;
        let cert_and_key = match (
            file(&config.tls_cert_file),
            file(&config.tls_private_key_file),
        ) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(invalid(
                    "tls_cert_file",
                    "needs --tls-private-key-file, and the key the certificate",
                ))
            }
        };
        let cluster_cidr = ClusterCidr::new(&config.cluster_cidr, config.node_cidr_mask_size)
            .map_err(|e| invalid("cluster_cidr", e.to_string()))?;
        let template = NodeTemplate {
            name_prefix: name_prefix(&config.name_prefix)?,
            capacity: capacity(config)?,
            labels: labels(&config.labels)?,
            taints: taints(&config.taints)?,
            zones: list(&config.zones),
            address: address.to_string(),
            kubelet_port: config.kubelet_port,
        };
        let pod_run_duration = humantime::parse_duration(&config.pod_run_duration)
            .map_err(|_| invalid("pod_run_duration", "must be a duration such as 1s or 500ms"))?;
        Ok(Settings {
            client: ClientSettings {
                kubeconfig: file(&config.kubeconfig),
                kube_api_qps: config.kube_api_qps,
                kube_api_burst: config.kube_api_burst,
            },
            nodes: config.nodes,
            template,
            cluster_cidr,
            tls: TlsFiles {
                cert_and_key,
                client_ca: file(&config.client_ca_file),
                metrics_ca: file(&config.metrics_ca_file),
            },
            register_metrics_api: config.register_metrics_api,
            healthz_address: format!("{}:{}", config.healthz_bind_address, config.healthz_port),
            pod_run_duration,
            node_lease_parallelism: config.node_lease_parallelism.max(1),
        })
    }
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A DNS-1123 subdomain once a number is appended.
fn name_prefix(prefix: &str) -> Result<String, ConfigError> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 240
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && prefix.starts_with(|c: char| c.is_ascii_alphanumeric());
    ok.then(|| prefix.to_string()).ok_or_else(|| {
        invalid(
            "name_prefix",
            "must be lower-case letters, digits, '-' or '.', starting with a letter or digit",
        )
    })
}

fn capacity(config: &NodesConfig) -> Result<Amounts, ConfigError> {
    let mut capacity = Amounts::new();
    let fields: [(&'static str, &str, &str); 4] = [
        ("cpu", "cpu", &config.cpu),
        ("memory", "memory", &config.memory),
        ("pods", "pods", &config.pods),
        (
            "ephemeral_storage",
            "ephemeral-storage",
            &config.ephemeral_storage,
        ),
    ];
    for (field, resource, text) in fields {
        let amount = quantity::amount(
            resource,
            &k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_string()),
        )
        .map_err(|e| invalid(field, e.to_string()))?;
        if amount < 0 {
            return Err(invalid(field, "may not be negative"));
        }
        capacity.insert(resource.to_string(), amount);
    }
    for pair in list(&config.extended_resources) {
        let (name, text) = pair.split_once('=').ok_or_else(|| {
            invalid(
                "extended_resources",
                format!("{pair:?} is not name=quantity"),
            )
        })?;
        if !name.contains('/') {
            return Err(invalid(
                "extended_resources",
                format!("{name:?} must be a domain-qualified name such as example.com/gpu"),
            ));
        }
        let amount = quantity::parse_units(text)
            .map_err(|e| invalid("extended_resources", e.to_string()))?;
        capacity.insert(name.trim().to_string(), amount);
    }
    Ok(capacity)
}

fn labels(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    list(text)
        .into_iter()
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid("labels", format!("{pair:?} is not key=value")))?;
            if key.is_empty() || key.len() > 316 || value.len() > 63 {
                return Err(invalid(
                    "labels",
                    format!("{pair:?}: keys and values must be label keys and values"),
                ));
            }
            Ok((key.to_string(), value.to_string()))
        })
        .collect()
}

fn taints(text: &str) -> Result<Vec<Taint>, ConfigError> {
    list(text)
        .into_iter()
        .map(|spec| {
            let (pair, effect) = spec.rsplit_once(':').ok_or_else(|| {
                invalid(
                    "taints",
                    format!("{spec:?} is not key=value:Effect or key:Effect"),
                )
            })?;
            if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(invalid(
                    "taints",
                    format!(
                        "{spec:?}: the effect must be NoSchedule, PreferNoSchedule or NoExecute"
                    ),
                ));
            }
            let (key, value) = match pair.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (pair, None),
            };
            if key.is_empty() {
                return Err(invalid("taints", format!("{spec:?} has no key")));
            }
            Ok(Taint {
                key: key.to_string(),
                value,
                effect: effect.to_string(),
                time_added: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Flags;

    fn parsed(flags: Flags) -> Result<Settings, ConfigError> {
        Settings::parse(&NodesConfig::load(&flags).unwrap())
    }

    #[test]
    fn the_defaults_make_a_kubelet_sized_node() {
        let s = parsed(Flags::default()).unwrap();
        assert_eq!(s.nodes, 1);
        assert_eq!(s.template.capacity["cpu"], 32_000);
        assert_eq!(s.template.capacity["memory"], 256 << 30);
        assert_eq!(s.template.capacity["pods"], 110);
        assert_eq!(s.template.name(0), "capstan-node-0");
        assert_eq!(s.pod_run_duration, Duration::from_secs(1));
    }

    #[test]
    fn labels_taints_zones_and_extended_resources_are_read() {
        let s = parsed(Flags {
            labels: Some("tier=sim, team=a".into()),
            taints: Some("dedicated=sim:NoSchedule,gpu:NoExecute".into()),
            zones: Some("a,b,c".into()),
            extended_resources: Some("example.com/gpu=8".into()),
            ..Flags::default()
        })
        .unwrap();
        assert_eq!(s.template.labels["team"], "a");
        assert_eq!(s.template.taints.len(), 2);
        assert_eq!(s.template.taints[1].value, None);
        assert_eq!(s.template.zones, ["a", "b", "c"]);
        assert_eq!(s.template.capacity["example.com/gpu"], 8);
    }

    #[test]
    fn bad_values_name_their_flag() {
        let bad = |flags: Flags, field: &str| {
            let err = parsed(flags).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        };
        bad(
            Flags {
                cpu: Some("lots".into()),
                ..Flags::default()
            },
            "cpu",
        );
        bad(
            Flags {
                taints: Some("k=v:Sometimes".into()),
                ..Flags::default()
            },
            "taints",
        );
        bad(
            Flags {
                labels: Some("novalue".into()),
                ..Flags::default()
            },
            "labels",
        );
        bad(
            Flags {
                node_ip: Some("here".into()),
                ..Flags::default()
            },
            "node_ip",
        );
        bad(
            Flags {
                cluster_cidr: Some("10.0.0.0/24".into()),
                ..Flags::default()
            },
            "cluster_cidr",
        );
        bad(
            Flags {
                name_prefix: Some("Node_".into()),
                ..Flags::default()
            },
            "name_prefix",
        );
        bad(
            Flags {
                extended_resources: Some("gpu=1".into()),
                ..Flags::default()
            },
            "extended_resources",
        );
        bad(
            Flags {
                tls_cert_file: Some("c.pem".into()),
                ..Flags::default()
            },
            "tls_cert_file",
        );
        bad(
            Flags {
                pod_run_duration: Some("later".into()),
                ..Flags::default()
            },
            "pod_run_duration",
        );
    }
}
