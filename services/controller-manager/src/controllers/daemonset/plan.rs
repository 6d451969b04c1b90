//! What one sync of a DaemonSet does, decided without side effects
//! (kube's `manage` and `rollingUpdate`): a pod made on each node that
//! should run one and has none; failed pods, extra pods and pods on nodes
//! they no longer fit deleted; and, under RollingUpdate, pods of an old
//! revision replaced: with maxSurge 0 by deleting at most maxUnavailable
//! available ones at a time (unavailable ones go at once), with maxSurge
//! by first making the new pod beside the old one, which goes once the
//! new one is available.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

use super::eligibility::Fit;
use crate::history::CONTROLLER_REVISION_HASH;
use crate::pods;

/// One node as the plan sees it.
pub struct NodePods {
    pub node: String,
    pub fit: Fit,
    /// The daemon's pods on (or pinned to) the node.
    pub pods: Vec<Arc<Pod>>,
}

/// The rolling update's budget, already scaled to the desired count;
/// None under OnDelete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rolling {
    pub max_surge: i32,
    pub max_unavailable: i32,
}

/// A node's old-revision and new-revision pod, each if there is one.
type OldAndNew<'a> = (Option<&'a Arc<Pod>>, Option<&'a Arc<Pod>>);

pub struct Plan {
    pub create_on: Vec<String>,
    pub delete: Vec<Arc<Pod>>,
}

pub struct Planner {
    pub hash: String,
    pub min_ready_seconds: i32,
    pub rolling: Option<Rolling>,
    pub now: DateTime<Utc>,
}

fn is_updated(pod: &Pod, hash: &str) -> bool {
    let labels = pod.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
        .map(String::as_str)
        == Some(hash)
}

fn oldest_first(pods: &mut [Arc<Pod>]) {
    pods.sort_by(|a, b| {
        let at = |p: &Pod| p.metadata.creation_timestamp.clone();
        at(a)
            .cmp(&at(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

impl Planner {
    fn available(&self, pod: &Pod) -> bool {
        pods::is_available(pod, self.min_ready_seconds, self.now) && !pods::is_terminating(pod)
    }

    fn surging(&self) -> bool {
        self.rolling.is_some_and(|r| r.max_surge > 0)
    }

    pub fn plan(&self, nodes: &[NodePods]) -> Plan {
        let mut plan = Plan {
            create_on: Vec::new(),
            delete: Vec::new(),
        };
        for node in nodes {
            self.manage(node, &mut plan);
        }
        if let Some(rolling) = self.rolling {
            match rolling.max_surge > 0 {
                true => self.surge(nodes, rolling.max_surge, &mut plan),
                false => self.replace(nodes, rolling.max_unavailable, &mut plan),
            }
        }
        plan
    }

    /// kube's `podsShouldBeOnNode`.
    fn manage(&self, node: &NodePods, plan: &mut Plan) {
        let live: Vec<Arc<Pod>> = node
            .pods
            .iter()
            .filter(|p| !pods::is_terminating(p))
            .cloned()
            .collect();
        if !node.fit.should_continue_running {
            plan.delete.extend(live);
            return;
        }
        let (failed, mut running): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
            live.into_iter().partition(|p| pods::phase(p) == "Failed");
        plan.delete.extend(failed);
        if !node.fit.should_run {
            // A pod made before the controller saw the node's new taint
            // and not bound yet has never run, so "continue running" does
            // not apply: the scheduler will refuse it and it would stay
            // Pending forever.
            let (unbound, bound): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = running
                .into_iter()
                .partition(|p| pods::node_name(p).is_empty());
            plan.delete.extend(unbound);
            running = bound;
        }
        if node.fit.should_run
            && running.is_empty()
            && node
                .pods
                .iter()
                .all(|p| !pods::is_terminating(p) || pods::phase(p) == "Failed")
        {
            plan.create_on.push(node.node.clone());
            return;
        }
        oldest_first(&mut running);
        let (new, old): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
            running.into_iter().partition(|p| is_updated(p, &self.hash));
        // Surging keeps the oldest of each revision; otherwise one pod.
        let keep: Vec<&Arc<Pod>> = match self.surging() {
            true => new.first().into_iter().chain(old.first()).collect(),
            false => old.first().or(new.first()).into_iter().collect(),
        };
        let extra = new
            .iter()
            .chain(old.iter())
            .filter(|p| !keep.iter().any(|k| Arc::ptr_eq(k, p)));
        plan.delete.extend(extra.cloned());
    }

    /// The node's old and new pod, if it has at most one of each.
    fn old_and_new<'a>(&self, node: &'a NodePods) -> Option<OldAndNew<'a>> {
        let live: Vec<&Arc<Pod>> = node.pods.iter().filter(|p| pods::is_active(p)).collect();
        let (new, old): (Vec<&Arc<Pod>>, Vec<&Arc<Pod>>) =
            live.into_iter().partition(|p| is_updated(p, &self.hash));
        (new.len() <= 1 && old.len() <= 1).then(|| (old.first().copied(), new.first().copied()))
    }

    /// maxSurge 0: delete old pods, keeping unavailability within budget.
    fn replace(&self, nodes: &[NodePods], max_unavailable: i32, plan: &mut Plan) {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for node in nodes.iter().filter(|n| n.fit.should_run) {
            match self.old_and_new(node) {
                None => unavailable += 1,
                Some((None, None)) => unavailable += 1,
                Some((_, Some(new))) if !self.available(new) => unavailable += 1,
                Some((Some(old), None)) if !self.available(old) => plan.delete.push(old.clone()),
                Some((Some(old), None)) => candidates.push(old.clone()),
                Some(_) => {}
            }
        }
        let budget = (max_unavailable.max(1) - unavailable).max(0) as usize;
        plan.delete.extend(candidates.into_iter().take(budget));
    }

    /// maxSurge > 0: a new pod beside each old one, within the surge budget.
    fn surge(&self, nodes: &[NodePods], max_surge: i32, plan: &mut Plan) {
        let mut surging = 0;
        let mut candidates = Vec::new();
        for node in nodes.iter().filter(|n| n.fit.should_run) {
            match self.old_and_new(node) {
                Some((Some(old), None)) if !self.available(old) => {
                    plan.create_on.push(node.node.clone())
                }
                Some((Some(_), None)) => candidates.push(node.node.clone()),
                Some((Some(old), Some(new))) if self.available(new) => {
                    plan.delete.push(old.clone())
                }
                Some((Some(_), Some(_))) => surging += 1,
                _ => {}
            }
        }
        let budget = (max_surge - surging).max(0) as usize;
        plan.create_on.extend(candidates.into_iter().take(budget));
    }
}
