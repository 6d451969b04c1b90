//! Why a pod fits no node: per-node statuses and the FitError message in
//! kube's exact form, e.g. `0/3 nodes are available: 1 Insufficient cpu,
//! 2 node(s) had untolerated taint {k: v}. preemption: 0/3 nodes are
//! available: 3 Preemption is not helpful for scheduling.`

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use super::status::{Code, Status};

/// The status of each node a cycle looked at; nodes not listed take `absent`.
#[derive(Debug, Clone, Default)]
pub struct NodeStatuses {
    statuses: HashMap<String, Status>,
    absent: Option<Status>,
}

impl NodeStatuses {
    pub fn set(&mut self, node: impl Into<String>, status: Status) {
        self.statuses.insert(node.into(), status);
    }

    /// The status of nodes not set explicitly.
    pub fn set_absent(&mut self, status: Status) {
        self.absent = Some(status);
    }

    pub fn get(&self, node: &str) -> Option<&Status> {
        self.statuses.get(node).or(self.absent.as_ref())
    }

    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    pub fn explicit(&self) -> impl Iterator<Item = (&String, &Status)> {
        self.statuses.iter()
    }

    /// The nodes whose code is `code`, among `all` (absent ones take `absent`'s code).
    pub fn nodes_with_code<'a>(
        &'a self,
        all: impl Iterator<Item = &'a str> + 'a,
        code: Code,
    ) -> Vec<&'a str> {
        all.filter(|name| self.get(name).map(|s| s.code) == Some(code))
            .collect()
    }
}

/// What a failed cycle learned.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    pub node_statuses: NodeStatuses,
    /// Plugins that rejected the pod somewhere: only cluster events they
    /// registered move the pod back to the activeQ.
    pub unschedulable_plugins: BTreeSet<&'static str>,
    pub pre_filter_message: Option<String>,
    pub post_filter_message: Option<String>,
}

impl Diagnosis {
    pub fn record(&mut self, status: &Status) {
        if status.is_rejected() && !status.plugin.is_empty() {
            self.unschedulable_plugins.insert(status.plugin);
        }
    }
}

/// A pod fits no node.
#[derive(Debug, Clone)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        match &self.diagnosis.pre_filter_message {
            Some(message) => write!(f, " {message}.")?,
            None => {
                let histogram = self.reason_histogram();
                if !histogram.is_empty() {
                    write!(f, " {}.", histogram.join(", "))?;
                }
            }
        }
        if let Some(message) = &self.diagnosis.post_filter_message {
            write!(f, " {message}")?;
        }
        Ok(())
    }
}

impl FitError {
    /// "N reason" for each reason, sorted as strings (kube sorts the formatted pairs).
    fn reason_histogram(&self) -> Vec<String> {
        let statuses = &self.diagnosis.node_statuses;
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, status) in statuses.explicit() {
            for reason in &status.reasons {
                *counts.entry(reason).or_default() += 1;
            }
        }
        if statuses.len() < self.num_all_nodes {
            if let Some(absent) = &statuses.absent {
                for reason in &absent.reasons {
                    *counts.entry(reason).or_default() += self.num_all_nodes - statuses.len();
                }
            }
        }
        let mut lines: Vec<String> = counts
            .into_iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        lines.sort();
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_counts_reasons_sorted_as_kube_does() {
        let mut diagnosis = Diagnosis::default();
        diagnosis
            .node_statuses
            .set("a", Status::unschedulable("Insufficient cpu"));
        let taint = "node(s) had untolerated taint {k: v}";
        diagnosis
            .node_statuses
            .set("b", Status::unresolvable(taint));
        diagnosis
            .node_statuses
            .set("c", Status::unresolvable(taint));
        diagnosis.post_filter_message = Some(
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                .into(),
        );
        let error = FitError {
            num_all_nodes: 3,
            diagnosis,
        };
        assert_eq!(
            error.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {k: v}. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn one_node_may_give_several_reasons_and_absent_nodes_count() {
        let mut diagnosis = Diagnosis::default();
        let mut both = Status::unschedulable("Insufficient cpu");
        both.reasons.push("Insufficient memory".into());
        diagnosis.node_statuses.set("a", both);
        diagnosis.node_statuses.set_absent(Status::unresolvable(
            "Preemption is not helpful for scheduling",
        ));
        let error = FitError {
            num_all_nodes: 3,
            diagnosis,
        };
        assert_eq!(
            error.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, \
             2 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn pre_filter_message_replaces_the_histogram() {
        let mut diagnosis = Diagnosis {
            pre_filter_message: Some("pod has unbound immediate PersistentVolumeClaims".into()),
            ..Default::default()
        };
        diagnosis
            .node_statuses
            .set("a", Status::unresolvable("ignored"));
        let error = FitError {
            num_all_nodes: 1,
            diagnosis,
        };
        assert_eq!(
            error.to_string(),
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        );
    }
}
