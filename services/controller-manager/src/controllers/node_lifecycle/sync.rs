//! One node's reconcile and the zone pass, kube's `monitorNodeHealth`
//! made event-driven: a node is looked at when it changes, when a pod is
//! bound to it while it is not ready, and when its grace period would run
//! out (the Lease handler moves that time on without any work); so a
//! healthy cluster costs one look per node per grace period, not a pass
//! over every node every few seconds.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::{indexes::BY_NODE_NAME, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;

use super::health::{self, Graces, Health};
use super::pod_readiness;
use super::taints::{self, taint, NOT_READY, NO_EXECUTE, UNREACHABLE};
use super::zones::{zone_of, Change, Rates, Zones, EXCLUDE_DISRUPTION};
use crate::context::Reconciler;
use crate::error::{Error, Result};

/// Slack after a grace period ends before the node is looked at.
const CHECK_SLACK: Duration = Duration::from_millis(500);

/// What the node lifecycle controller reads, writes and remembers.
pub struct Controller {
    pub nodes: Store<Node>,
    /// Indexed by node name.
    pub pods: Store<Pod>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    pub health: Health,
    pub zones: Mutex<Zones>,
    pub graces: Graces,
    pub rates: Rates,
    /// Where a node's next look is scheduled.
    pub queue: Option<WorkQueue<String>>,
    /// Nodes seen this term (for kube's RegisteredNode / RemovingNode events).
    pub known: Mutex<HashSet<String>>,
}

impl Reconciler for Controller {
    /// Reconciles the node `name`.
    async fn sync(&self, name: &str) -> Result<()> {
        let Some(cached) = self.nodes.get(None, name) else {
            self.removed(name);
            return Ok(());
        };
        self.registered(&cached);
        let now = Utc::now();
        let (grace, probe) = self.health.observe_node(&cached, self.graces, now);
        let observed = health::ready_status(&cached).to_string();
        let deadline = probe + grace;
        let mut node = (*cached).clone();
        if now > deadline {
            if health::mark_unknown(&mut node, now) {
                node = self.write_status(&node).await?;
            }
        } else if let Some(queue) = &self.queue {
            let wait = (deadline - now).to_std().unwrap_or_default() + CHECK_SLACK;
            queue.add_after(name.to_string(), wait);
        }
        let current = health::ready_status(&node).to_string();
        if observed == "True" && current != "True" {
            let message = format!("Node {name} status is now: NodeNotReady");
            self.recorder
                .record(&node, EventType::Normal, "NodeNotReady", message);
        }
        let (add, remove) = taints::no_schedule_diff(&node);
        if !add.is_empty() || !remove.is_empty() {
            taints::swap(&self.client, &node, &add, &remove).await?;
        }
        if health::ready_condition(&node).is_none() {
            // Never reported and still within its start-up grace.
            return Ok(());
        }
        self.no_execute(&node, &current).await?;
        if current != "True" {
            let pods = self.pods.by_index(BY_NODE_NAME, name);
            pod_readiness::mark_not_ready(&self.client, &self.recorder, name, &pods).await?;
        }
        Ok(())
    }
}

impl Controller {
    fn registered(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if self.known.lock().insert(name.clone()) {
            let message = format!("Registered Node {name} in Controller");
            self.recorder
                .record(node, EventType::Normal, "RegisteredNode", message);
        }
    }

    fn removed(&self, name: &str) {
        self.health.forget(name);
        self.zones.lock().dequeue(name);
        if self.known.lock().remove(name) {
            tracing::info!(node = name, "node removed from the controller");
        }
    }

    /// The node's status with its conditions Unknown; a conflict is
    /// retried by the queue with the node read again.
    async fn write_status(&self, node: &Node) -> Result<Node> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let body = serde_json::to_vec(node).map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(api
            .replace_status(name, &PostParams::default(), body)
            .await?)
    }

    /// kube's `processTaintBaseEviction`: a not-ready or unreachable node
    /// waits in its zone's queue for its NoExecute taint (swapped at once
    /// if it carries the other one); a ready node loses both.
    async fn no_execute(&self, node: &Node, ready: &str) -> Result<()> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let (wanted, other) = match ready {
            "True" => return self.mark_reachable(node).await,
            "False" => (taint(NOT_READY, NO_EXECUTE), taint(UNREACHABLE, NO_EXECUTE)),
            _ => (taint(UNREACHABLE, NO_EXECUTE), taint(NOT_READY, NO_EXECUTE)),
        };
        if taints::has(node, &wanted) {
            return Ok(());
        }
        if taints::has(node, &other) {
            taints::swap(&self.client, node, &[wanted], &[other]).await?;
            return Ok(());
        }
        self.zones.lock().enqueue(&zone_of(node), name, &self.rates);
        Ok(())
    }

    async fn mark_reachable(&self, node: &Node) -> Result<()> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.zones.lock().dequeue(name);
        let both = [taint(UNREACHABLE, NO_EXECUTE), taint(NOT_READY, NO_EXECUTE)];
        if both.iter().any(|t| taints::has(node, t)) {
            taints::swap(&self.client, node, &[], &both).await?;
        }
        Ok(())
    }

    /// Recounts the zones (kube's `handleDisruption`) from the cached nodes.
    pub async fn recount_zones(&self) {
        let nodes = self.nodes.list();
        let counted: Vec<(String, bool)> = nodes
            .iter()
            .filter(|n| {
                !n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(EXCLUDE_DISRUPTION))
            })
            .map(|n| (zone_of(n), health::ready_status(n) == "True"))
            .collect();
        let change = self.zones.lock().recount(&counted, &self.rates);
        match change {
            Change::None => {}
            Change::EnteredFullDisruption => {
                tracing::warn!(
                    "every node is not ready: no node is tainted for eviction until one is back"
                );
                for node in &nodes {
                    if let Err(err) = self.mark_reachable(node).await {
                        tracing::warn!(%err, node = ?node.metadata.name, "removing eviction taints failed");
                    }
                }
            }
            Change::LeftFullDisruption => {
                tracing::info!("some nodes are ready again: node grace periods start afresh");
                self.health.restart_all(Utc::now());
            }
        }
    }

    /// Taints the nodes whose turn in their zone's queue has come.
    pub async fn taint_due(&self) {
        let due = self.zones.lock().due();
        for name in due {
            let Some(node) = self.nodes.get(None, &name) else {
                continue;
            };
            let (wanted, other) = match health::ready_status(&node) {
                "True" => continue,
                "False" => (taint(NOT_READY, NO_EXECUTE), taint(UNREACHABLE, NO_EXECUTE)),
                _ => (taint(UNREACHABLE, NO_EXECUTE), taint(NOT_READY, NO_EXECUTE)),
            };
            match taints::swap(&self.client, &node, &[wanted], &[other]).await {
                Ok(_) => tracing::info!(node = %name, "tainted for eviction"),
                Err(err) => {
                    tracing::warn!(node = %name, %err, "tainting failed; queued again");
                    self.zones
                        .lock()
                        .enqueue(&zone_of(&node), &name, &self.rates);
                }
            }
        }
    }

    /// Nodes a newly bound pod landed on, if it is not ready there.
    pub fn needs_look(&self, pod: &Arc<Pod>) -> Option<String> {
        let node = crate::pods::node_name(pod);
        let cached = self.nodes.get(None, node)?;
        (health::ready_status(&cached) != "True").then(|| node.to_string())
    }
}
