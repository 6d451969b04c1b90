//! Every controller this manager runs, by kube-controller-manager's
//! names, and the `--controllers` selection.
//!
//! A controller is a folder: `mod.rs` wires it (which informers, which
//! handlers put which keys on its queue, how many workers) and the
//! reconcile function lives apart from the wiring (it takes the caches
//! and a client and does one object's work), so it can be unit-tested
//! against the in-memory API. To add one, make its folder and add a
//! [`Descriptor`] to [`all`].

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::context::Context;
use crate::error::Result;

pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod endpointslice_mirroring;
pub mod garbage_collector;
pub mod horizontal_pod_autoscaler;
pub mod job;
pub mod namespace;
pub mod node_lifecycle;
pub mod pod_termination;
pub mod podgc;
pub mod replicaset;
pub mod resourcequota;
pub mod root_ca_publisher;
pub mod serviceaccount;
pub mod statefulset;
pub mod taint_eviction;
pub mod ttl_after_finished;

/// How a controller is named and started.
pub struct Descriptor {
    /// kube's canonical name (`replicaset-controller`).
    pub name: &'static str,
    /// Older names kube still accepts in `--controllers` (`replicaset`).
    pub aliases: &'static [&'static str],
    /// Run under `*`.
    pub enabled_by_default: bool,
    /// Starts it; the future runs until the context stops.
    pub start: fn(Arc<Context>) -> BoxFuture<'static, Result<()>>,
}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Descriptor {
    fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// The controllers this manager implements.
pub fn all() -> Vec<Descriptor> {
    vec![
        Descriptor {
            name: "cronjob-controller",
            aliases: &["cronjob"],
            enabled_by_default: true,
            start: |ctx| Box::pin(cronjob::run(ctx)),
        },
        Descriptor {
            name: "daemonset-controller",
            aliases: &["daemonset"],
            enabled_by_default: true,
            start: |ctx| Box::pin(daemonset::run(ctx)),
        },
        Descriptor {
            name: "deployment-controller",
            aliases: &["deployment"],
            enabled_by_default: true,
            start: |ctx| Box::pin(deployment::run(ctx)),
        },
        Descriptor {
            name: "disruption-controller",
            aliases: &["disruption"],
            enabled_by_default: true,
            start: |ctx| Box::pin(disruption::run(ctx)),
        },
        Descriptor {
            name: "endpoints-controller",
            aliases: &["endpoint"],
            enabled_by_default: true,
            start: |ctx| Box::pin(endpoints::run(ctx)),
        },
        Descriptor {
            name: "endpointslice-controller",
            aliases: &["endpointslice"],
            enabled_by_default: true,
            start: |ctx| Box::pin(endpointslice::run(ctx)),
        },
        Descriptor {
            name: "endpointslice-mirroring-controller",
            aliases: &["endpointslicemirroring"],
            enabled_by_default: true,
            start: |ctx| Box::pin(endpointslice_mirroring::run(ctx)),
        },
        Descriptor {
            name: "garbage-collector-controller",
            aliases: &["garbagecollector"],
            enabled_by_default: true,
            start: |ctx| Box::pin(garbage_collector::run(ctx)),
        },
        Descriptor {
            name: "horizontal-pod-autoscaler-controller",
            aliases: &["horizontalpodautoscaling"],
            enabled_by_default: true,
            start: |ctx| Box::pin(horizontal_pod_autoscaler::run(ctx)),
        },
        Descriptor {
            name: "job-controller",
            aliases: &["job"],
            enabled_by_default: true,
            start: |ctx| Box::pin(job::run(ctx)),
        },
        Descriptor {
            name: "namespace-controller",
            aliases: &["namespace"],
            enabled_by_default: true,
            start: |ctx| Box::pin(namespace::run(ctx)),
        },
        Descriptor {
            name: "node-lifecycle-controller",
            aliases: &["nodelifecycle"],
            enabled_by_default: true,
            start: |ctx| Box::pin(node_lifecycle::run(ctx)),
        },
        Descriptor {
            name: "pod-garbage-collector-controller",
            aliases: &["podgc"],
            enabled_by_default: true,
            start: |ctx| Box::pin(podgc::run(ctx)),
        },
        Descriptor {
            name: "pod-termination-controller",
            aliases: &[],
            enabled_by_default: true,
            start: |ctx| Box::pin(pod_termination::run(ctx)),
        },
        Descriptor {
            name: "replicaset-controller",
            aliases: &["replicaset"],
            enabled_by_default: true,
            start: |ctx| Box::pin(replicaset::run_replica_sets(ctx)),
        },
        Descriptor {
            name: "replicationcontroller-controller",
            aliases: &["replicationcontroller"],
            enabled_by_default: true,
            start: |ctx| Box::pin(replicaset::run_replication_controllers(ctx)),
        },
        Descriptor {
            name: "statefulset-controller",
            aliases: &["statefulset"],
            enabled_by_default: true,
            start: |ctx| Box::pin(statefulset::run(ctx)),
        },
        Descriptor {
            name: "taint-eviction-controller",
            aliases: &[],
            enabled_by_default: true,
            start: |ctx| Box::pin(taint_eviction::run(ctx)),
        },
        Descriptor {
            name: "ttl-after-finished-controller",
            aliases: &["ttl-after-finished"],
            enabled_by_default: true,
            start: |ctx| Box::pin(ttl_after_finished::run(ctx)),
        },
        Descriptor {
            name: "resourcequota-controller",
            aliases: &["resourcequota"],
            enabled_by_default: true,
            start: |ctx| Box::pin(resourcequota::run(ctx)),
        },
        Descriptor {
            name: "serviceaccount-controller",
            aliases: &["serviceaccount"],
            enabled_by_default: true,
            start: |ctx| Box::pin(serviceaccount::run(ctx)),
        },
        Descriptor {
            name: "root-ca-certificate-publisher-controller",
            aliases: &["root-ca-cert-publisher"],
            enabled_by_default: true,
            start: |ctx| Box::pin(root_ca_publisher::run(ctx)),
        },
    ]
}

/// kube's controllers this manager does not run (yet): accepted in
/// `--controllers` so kube's command lines work unchanged.
const KNOWN_ELSEWHERE: &[&str] = &[
    "bootstrap-signer-controller",
    "bootstrapsigner",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller",
    "csrapproving",
    "csrcleaner",
    "csrsigning",
    "clusterrole-aggregation-controller",
    "clusterrole-aggregation",
    "cronjob-controller",
    "cronjob",
    "daemonset-controller",
    "daemonset",
    "deployment-controller",
    "deployment",
    "disruption-controller",
    "disruption",
    "endpoints-controller",
    "endpoint",
    "endpointslice-controller",
    "endpointslice",
    "endpointslice-mirroring-controller",
    "endpointslicemirroring",
    "ephemeral-volume-controller",
    "ephemeral-volume",
    "garbage-collector-controller",
    "garbagecollector",
    "horizontal-pod-autoscaler-controller",
    "horizontalpodautoscaling",
    "job-controller",
    "job",
    "legacy-serviceaccount-token-cleaner-controller",
    "namespace-controller",
    "namespace",
    "node-ipam-controller",
    "nodeipam",
    "node-lifecycle-controller",
    "nodelifecycle",
    "node-route-controller",
    "route",
    "persistentvolume-attach-detach-controller",
    "attachdetach",
    "persistentvolume-binder-controller",
    "persistentvolume-binder",
    "persistentvolume-expander-controller",
    "persistentvolume-expander",
    "persistentvolume-protection-controller",
    "pv-protection",
    "persistentvolumeclaim-protection-controller",
    "pvc-protection",
    "pod-garbage-collector-controller",
    "podgc",
    "resourcequota-controller",
    "resourcequota",
    "root-ca-certificate-publisher-controller",
    "root-ca-cert-publisher",
    "service-lb-controller",
    "service",
    "serviceaccount-controller",
    "serviceaccount",
    "serviceaccount-token-controller",
    "serviceaccount-token",
    "statefulset-controller",
    "statefulset",
    "taint-eviction-controller",
    "token-cleaner-controller",
    "tokencleaner",
    "ttl-after-finished-controller",
    "ttl-after-finished",
    "ttl-controller",
    "ttl",
    "validatingadmissionpolicy-status-controller",
];

/// The controllers `spec` (`--controllers`) selects, kube's rules: `-name`
/// disables, `name` enables, `*` enables every default one. An unknown
/// name is an error naming it.
pub fn selection(spec: &str) -> std::result::Result<Vec<Descriptor>, String> {
    let entries: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let known = all();
    for entry in &entries {
        let name = entry.strip_prefix('-').unwrap_or(entry);
        let recognised = name == "*"
            || known.iter().any(|d| d.answers_to(name))
            || KNOWN_ELSEWHERE.contains(&name);
        if !recognised {
            return Err(format!("{name:?} is not in the list of known controllers"));
        }
    }
    let star = entries.contains(&"*");
    Ok(known
        .into_iter()
        .filter(|d| {
            let named = |e: &&str| d.answers_to(e);
            let disabled = entries
                .iter()
                .filter_map(|e| e.strip_prefix('-'))
                .any(|e| named(&e));
            let enabled = entries.iter().any(named);
            !disabled && (enabled || (star && d.enabled_by_default))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(spec: &str) -> Vec<&'static str> {
        selection(spec).unwrap().iter().map(|d| d.name).collect()
    }

    #[test]
    fn star_minus_and_aliases() {
        assert!(names("*").contains(&"replicaset-controller"));
        assert!(!names("*,-replicaset").contains(&"replicaset-controller"));
        assert!(!names("*,-replicaset-controller").contains(&"replicaset-controller"));
        assert_eq!(names("replicaset"), ["replicaset-controller"]);
        assert!(names("").is_empty());
        // kube's names this manager leaves to others are accepted.
        assert!(selection("*,-bootstrapsigner,tokencleaner").is_ok());
        let err = selection("*,-nonsense").unwrap_err();
        assert!(err.contains("nonsense"), "{err}");
    }
}
