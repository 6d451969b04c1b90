//! Zones and the pace of NoExecute tainting, kube's disruption handling:
//! unreachable nodes are tainted (and so their pods evicted) through one
//! rate-limited queue per zone, `--node-eviction-rate` nodes a second
//! (burst 1). A zone with many unready nodes (over
//! `--unhealthy-zone-threshold`, and more than two) is partially
//! disrupted: its rate falls to `--secondary-node-eviction-rate` if it is
//! larger than `--large-cluster-size-threshold` nodes, else to nothing. A
//! zone entirely down goes on at the normal rate — unless every zone is
//! down, when the controller itself is probably the one cut off: then
//! nothing is tainted and the taints already there come off.

use std::collections::{HashMap, VecDeque};

use capstan_client::rate::TokenBucket;
use k8s_openapi::api::core::v1::Node;

/// The labels that place a node.
const REGION: [&str; 2] = [
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
];
const ZONE: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
];
/// Nodes with this label count in no zone's health.
pub const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Initial,
    Normal,
    PartialDisruption,
    FullDisruption,
}

impl ZoneState {
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneState::Initial => "Initial",
            ZoneState::Normal => "Normal",
            ZoneState::PartialDisruption => "PartialDisruption",
            ZoneState::FullDisruption => "FullDisruption",
        }
    }
}

/// The eviction settings (kube-controller-manager's flags).
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    pub eviction_qps: f64,
    pub secondary_qps: f64,
    pub large_cluster_threshold: usize,
    pub unhealthy_zone_threshold: f64,
}

/// The zone key of a node: region and zone, or "" when it has neither.
pub fn zone_of(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let first = |keys: [&str; 2]| {
        keys.iter()
            .find_map(|k| labels.and_then(|l| l.get(*k)).cloned())
            .unwrap_or_default()
    };
    let (region, zone) = (first(REGION), first(ZONE));
    match (region.is_empty(), zone.is_empty()) {
        (true, true) => String::new(),
        _ => format!("{region}:\u{0}:{zone}"),
    }
}

/// A zone's state from how many of its nodes are ready and not.
pub fn zone_state(ready: usize, not_ready: usize, rates: &Rates) -> ZoneState {
    let total = ready + not_ready;
    if ready == 0 && not_ready > 0 {
        return ZoneState::FullDisruption;
    }
    if not_ready > 2 && not_ready as f64 / total as f64 >= rates.unhealthy_zone_threshold {
        return ZoneState::PartialDisruption;
    }
    ZoneState::Normal
}

/// The tainting rate for a zone of `size` nodes in `state`.
pub fn rate_for(state: ZoneState, size: usize, rates: &Rates) -> f64 {
    match state {
        ZoneState::PartialDisruption if size > rates.large_cluster_threshold => rates.secondary_qps,
        ZoneState::PartialDisruption => 0.0,
        _ => rates.eviction_qps,
    }
}

/// One zone's queue of nodes waiting for their NoExecute taint.
struct Tainter {
    queue: VecDeque<String>,
    qps: f64,
    /// None: nothing may be tainted now.
    bucket: Option<TokenBucket>,
}

impl Tainter {
    fn new(qps: f64) -> Tainter {
        Tainter {
            queue: VecDeque::new(),
            qps,
            bucket: (qps > 0.0).then(|| TokenBucket::new(qps, 1)),
        }
    }

    /// A new rate; one waiting for its token keeps waiting (burst 1).
    fn set_rate(&mut self, qps: f64) {
        if (qps - self.qps).abs() < f64::EPSILON {
            return;
        }
        let waiting = self.bucket.as_ref().is_some_and(|b| !b.try_take());
        self.qps = qps;
        self.bucket = (qps > 0.0).then(|| TokenBucket::new(qps, 1));
        if waiting {
            if let Some(bucket) = &self.bucket {
                bucket.try_take();
            }
        }
    }
}

/// Every zone's state and tainting queue.
#[derive(Default)]
pub struct Zones {
    states: HashMap<String, ZoneState>,
    tainters: HashMap<String, Tainter>,
}

/// What a recount of the zones calls for.
#[derive(Debug, PartialEq)]
pub enum Change {
    None,
    /// Every zone is down: untaint everything and taint nothing.
    EnteredFullDisruption,
    /// Out of that: every node's grace period starts again.
    LeftFullDisruption,
}

impl Zones {
    /// Queues `node` of `zone` for its NoExecute taint (once).
    pub fn enqueue(&mut self, zone: &str, node: &str, rates: &Rates) {
        let tainter = self
            .tainters
            .entry(zone.to_string())
            .or_insert_with(|| Tainter::new(rates.eviction_qps));
        if !tainter.queue.iter().any(|n| n == node) {
            tainter.queue.push_back(node.to_string());
        }
    }

    /// Takes `node` off its zone's queue (it is ready again, or gone).
    pub fn dequeue(&mut self, node: &str) {
        for tainter in self.tainters.values_mut() {
            tainter.queue.retain(|n| n != node);
        }
    }

    /// The nodes whose turn has come: at most one per token each zone has.
    pub fn due(&mut self) -> Vec<String> {
        let mut due = Vec::new();
        for tainter in self.tainters.values_mut() {
            while let (Some(_), Some(bucket)) = (tainter.queue.front(), &tainter.bucket) {
                if !bucket.try_take() {
                    break;
                }
                due.extend(tainter.queue.pop_front());
            }
        }
        due
    }

    pub fn state(&self, zone: &str) -> Option<ZoneState> {
        self.states.get(zone).copied()
    }

    /// Recounts the zones from `(zone, ready)` of every counted node and
    /// sets each zone's rate, kube's `handleDisruption`.
    pub fn recount(&mut self, nodes: &[(String, bool)], rates: &Rates) -> Change {
        let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
        for (zone, ready) in nodes {
            let count = counts.entry(zone.as_str()).or_default();
            match ready {
                true => count.0 += 1,
                false => count.1 += 1,
            }
        }
        let new: HashMap<String, (ZoneState, usize)> = counts
            .iter()
            .map(|(z, (r, n))| (z.to_string(), (zone_state(*r, *n, rates), r + n)))
            .collect();
        let all_now = !new.is_empty() && new.values().all(|(s, _)| *s == ZoneState::FullDisruption);
        self.states.retain(|zone, _| new.contains_key(zone));
        for zone in new.keys() {
            self.states
                .entry(zone.clone())
                .or_insert(ZoneState::Initial);
            self.tainters
                .entry(zone.clone())
                .or_insert_with(|| Tainter::new(rates.eviction_qps));
        }
        let all_before = !self.states.is_empty()
            && self
                .states
                .values()
                .all(|s| *s == ZoneState::FullDisruption);
        if all_now && all_before {
            return Change::None;
        }
        if all_now {
            for (zone, state) in self.states.iter_mut() {
                *state = ZoneState::FullDisruption;
                if let Some(tainter) = self.tainters.get_mut(zone) {
                    tainter.set_rate(0.0);
                }
            }
            return Change::EnteredFullDisruption;
        }
        for (zone, (state, size)) in &new {
            let tainter = self.tainters.get_mut(zone).expect("made above");
            if self.states.get(zone) != Some(state) || all_before {
                tainter.set_rate(rate_for(*state, *size, rates));
            }
            self.states.insert(zone.clone(), *state);
        }
        match all_before {
            true => Change::LeftFullDisruption,
            false => Change::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: Rates = Rates {
        eviction_qps: 0.1,
        secondary_qps: 0.01,
        large_cluster_threshold: 50,
        unhealthy_zone_threshold: 0.55,
    };

    fn nodes(zone: &str, ready: usize, not_ready: usize) -> Vec<(String, bool)> {
        let mut list = vec![(zone.to_string(), true); ready];
        list.extend(vec![(zone.to_string(), false); not_ready]);
        list
    }

    #[test]
    fn zone_states_follow_kubes_thresholds() {
        assert_eq!(zone_state(0, 1, &RATES), ZoneState::FullDisruption);
        assert_eq!(
            zone_state(1, 2, &RATES),
            ZoneState::Normal,
            "two unready is never partial"
        );
        assert_eq!(zone_state(2, 3, &RATES), ZoneState::PartialDisruption);
        assert_eq!(zone_state(10, 3, &RATES), ZoneState::Normal);
        assert_eq!(rate_for(ZoneState::PartialDisruption, 10, &RATES), 0.0);
        assert_eq!(rate_for(ZoneState::PartialDisruption, 100, &RATES), 0.01);
        assert_eq!(rate_for(ZoneState::FullDisruption, 3, &RATES), 0.1);
    }

    #[tokio::test(start_paused = true)]
    async fn one_node_per_token_per_zone() {
        let mut zones = Zones::default();
        let mut all = nodes("a", 5, 2);
        all.extend(nodes("b", 5, 1));
        assert_eq!(zones.recount(&all, &RATES), Change::None);
        zones.enqueue("a", "a1", &RATES);
        zones.enqueue("a", "a2", &RATES);
        zones.enqueue("a", "a1", &RATES);
        zones.enqueue("b", "b1", &RATES);
        let mut due = zones.due();
        due.sort();
        assert_eq!(due, ["a1", "b1"]);
        assert!(zones.due().is_empty(), "zone a waits for its next token");
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(zones.due(), ["a2"]);
        zones.enqueue("b", "b2", &RATES);
        zones.dequeue("b2");
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert!(zones.due().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn every_zone_down_stops_tainting_until_one_recovers() {
        let mut zones = Zones::default();
        zones.recount(&nodes("a", 3, 0), &RATES);
        assert_eq!(
            zones.recount(&nodes("a", 0, 3), &RATES),
            Change::EnteredFullDisruption
        );
        zones.enqueue("a", "a1", &RATES);
        tokio::time::advance(std::time::Duration::from_secs(60)).await;
        assert!(zones.due().is_empty());
        assert_eq!(zones.recount(&nodes("a", 0, 3), &RATES), Change::None);
        assert_eq!(
            zones.recount(&nodes("a", 1, 2), &RATES),
            Change::LeftFullDisruption
        );
        assert_eq!(zones.state("a"), Some(ZoneState::Normal));
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(zones.due(), ["a1"]);
    }
}
