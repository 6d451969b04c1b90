//! What the controller knows of each node's liveness, kube's
//! `nodeHealthMap`: when it last saw the node alive (a new heartbeat in
//! its Ready condition, or a renewal of its Lease), taken on this
//! process's clock so that clock skew between nodes and controller does
//! not matter. A node not seen alive for its grace period has every
//! condition set to Unknown ("Kubelet stopped posting node status.").
//!
//! It lives for one leadership term: a new leader starts every node's
//! grace period afresh rather than trust timestamps it did not observe.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::{DateTime, Utc};
use parking_lot::Mutex;

/// The conditions a silent node has set to Unknown (NetworkUnavailable is
/// the network's, not the kubelet's).
const WATCHED: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

#[derive(Clone, Debug)]
struct Entry {
    /// When the node was last seen alive.
    probe: DateTime<Utc>,
    /// The Ready condition as last seen in its status.
    ready: Option<NodeCondition>,
    /// The Lease's last renewal seen.
    lease_renewed: Option<DateTime<Utc>>,
}

/// Grace periods: for nodes that have reported, and for new ones.
#[derive(Clone, Copy, Debug)]
pub struct Graces {
    pub monitor: Duration,
    pub startup: Duration,
}

/// Liveness of every node, shared by the handlers and the workers.
#[derive(Default)]
pub struct Health {
    nodes: Mutex<HashMap<String, Entry>>,
}

pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "Ready")
}

/// The Ready status (`True`, `False`, `Unknown`; Unknown if absent).
pub fn ready_status(node: &Node) -> &str {
    ready_condition(node).map_or("Unknown", |c| c.status.as_str())
}

impl Health {
    /// A renewal of the node's Lease at `renewed`, seen at `now`.
    pub fn observe_lease(&self, node: &str, renewed: DateTime<Utc>, now: DateTime<Utc>) {
        let mut nodes = self.nodes.lock();
        let entry = nodes.entry(node.to_string()).or_insert_with(|| Entry {
            probe: now,
            ready: None,
            lease_renewed: None,
        });
        if entry.lease_renewed.is_none_or(|seen| seen < renewed) {
            entry.lease_renewed = Some(renewed);
            entry.probe = now;
        }
    }

    /// Takes in the node's status as cached at `now`; returns the grace
    /// period it is entitled to and when it was last seen alive.
    pub fn observe_node(
        &self,
        node: &Node,
        graces: Graces,
        now: DateTime<Utc>,
    ) -> (Duration, DateTime<Utc>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let current = ready_condition(node).cloned();
        let created = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let mut nodes = self.nodes.lock();
        let saved = nodes.get(&name).cloned();
        let grace = match current {
            None => graces.startup,
            Some(_) => graces.monitor,
        };
        let fresh = |probe| Entry {
            probe,
            ready: current.clone(),
            lease_renewed: saved.as_ref().and_then(|s| s.lease_renewed),
        };
        let entry = match (&saved, &current) {
            (None, None) => fresh(created),
            (None, Some(_)) => fresh(now),
            (Some(saved), None) if saved.ready.is_none() => Entry {
                ready: None,
                ..saved.clone()
            },
            (Some(saved), Some(_)) if saved.ready.is_none() => fresh(now.max(saved.probe)),
            (Some(_), None) => fresh(now),
            (Some(saved), Some(current)) => {
                let beat = |c: &NodeCondition| c.last_heartbeat_time.clone();
                let moved = saved.ready.as_ref().map(beat) != Some(beat(current));
                Entry {
                    probe: if moved { now } else { saved.probe },
                    ready: Some(current.clone()),
                    lease_renewed: saved.lease_renewed,
                }
            }
        };
        let probe = entry.probe;
        nodes.insert(name, entry);
        (grace, probe)
    }

    /// Every node's liveness restarts now (leaving the mode where every
    /// zone was down: the controller may have been the one cut off).
    pub fn restart_all(&self, now: DateTime<Utc>) {
        for entry in self.nodes.lock().values_mut() {
            entry.probe = now;
        }
    }

    pub fn forget(&self, node: &str) {
        self.nodes.lock().remove(node);
    }
}

/// Sets every watched condition of a silent node to Unknown (kube's
/// reasons and messages); returns whether the Ready condition changed.
pub fn mark_unknown(node: &mut Node, now: DateTime<Utc>) -> bool {
    let before = ready_condition(node).cloned();
    let created = node.metadata.creation_timestamp.clone();
    let status = node.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for kind in WATCHED {
        match conditions.iter_mut().find(|c| c.type_ == kind) {
            None => conditions.push(NodeCondition {
                type_: kind.to_string(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: created.clone(),
                last_transition_time: Some(Time(now)),
            }),
            Some(condition) if condition.status != "Unknown" => {
                condition.status = "Unknown".into();
                condition.reason = Some("NodeStatusUnknown".into());
                condition.message = Some("Kubelet stopped posting node status.".into());
                condition.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
        }
    }
    ready_condition(node).cloned() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use k8s_openapi::chrono::Duration as ChronoDuration;
    use serde_json::json;

    const GRACES: Graces = Graces {
        monitor: Duration::from_secs(40),
        startup: Duration::from_secs(60),
    };

    fn node(heartbeat: Option<DateTime<Utc>>) -> Node {
        let conditions = match heartbeat {
            Some(at) => json!([{"type": "Ready", "status": "True",
                "lastHeartbeatTime": at.to_rfc3339(), "lastTransitionTime": at.to_rfc3339()},
                {"type": "MemoryPressure", "status": "False"}]),
            None => json!([]),
        };
        object(
            json!({"metadata": {"name": "n1", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "status": {"conditions": conditions}}),
        )
    }

    #[test]
    fn heartbeats_and_lease_renewals_keep_a_node_alive() {
        let health = Health::default();
        let t0 = Utc::now();
        let beat = t0 - ChronoDuration::seconds(5);
        let (grace, probe) = health.observe_node(&node(Some(beat)), GRACES, t0);
        assert_eq!(
            (grace, probe),
            (GRACES.monitor, t0),
            "first sight counts as alive"
        );
        let t1 = t0 + ChronoDuration::seconds(30);
        assert_eq!(
            health.observe_node(&node(Some(beat)), GRACES, t1).1,
            t0,
            "same heartbeat"
        );
        health.observe_lease("n1", t1 - ChronoDuration::seconds(1), t1);
        let t2 = t1 + ChronoDuration::seconds(10);
        assert_eq!(
            health.observe_node(&node(Some(beat)), GRACES, t2).1,
            t1,
            "the lease renewal"
        );
        let newer = t2 - ChronoDuration::seconds(1);
        assert_eq!(
            health.observe_node(&node(Some(newer)), GRACES, t2).1,
            t2,
            "a new heartbeat"
        );
        // An old renewal seen again changes nothing.
        health.observe_lease(
            "n1",
            t1 - ChronoDuration::seconds(1),
            t2 + ChronoDuration::seconds(5),
        );
        assert_eq!(health.observe_node(&node(Some(newer)), GRACES, t2).1, t2);
    }

    #[test]
    fn a_node_that_never_reported_gets_the_startup_grace_from_its_creation() {
        let health = Health::default();
        let now = Utc::now();
        let (grace, probe) = health.observe_node(&node(None), GRACES, now);
        assert_eq!(grace, GRACES.startup);
        assert_eq!(probe.to_rfc3339(), "2020-01-01T00:00:00+00:00");
    }

    #[test]
    fn a_silent_node_goes_unknown_with_kubes_reasons() {
        let now = Utc::now();
        let mut silent = node(Some(now - ChronoDuration::minutes(5)));
        assert!(mark_unknown(&mut silent, now));
        let conditions = silent.status.unwrap().conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            ready.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        let never = conditions
            .iter()
            .find(|c| c.type_ == "DiskPressure")
            .unwrap();
        assert_eq!(never.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(conditions.len(), 4);
        let mut again = node(None);
        again.status.as_mut().unwrap().conditions = Some(conditions);
        assert!(!mark_unknown(&mut again, now), "already Unknown");
    }
}
