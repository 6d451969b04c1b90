//! Stopping and starting a node's kubelet, for failure tests: a stopped
//! node renews no Lease, reports no status and leaves its pods alone (as
//! a dead kubelet), so its Lease lapses and the node lifecycle controller
//! marks it NotReady after its grace period; started again, it renews at
//! once and reconciles its pods.

use std::sync::Arc;

use super::fleet::SharedFleet;
use super::leases::LeaseKeeper;
use super::metrics;
use super::node_status::StatusReporter;
use super::pods::PodSyncer;

#[derive(Clone)]
pub struct Control {
    pub fleet: SharedFleet,
    pub leases: Arc<LeaseKeeper>,
    pub status: Arc<StatusReporter>,
    pub pods: Arc<PodSyncer>,
}

impl Control {
    /// Stops or starts `name`; `None` if it is not one of this process's nodes.
    pub fn set_running(&self, name: &str, running: bool) -> Option<bool> {
        let node = self.fleet.get(name)?;
        let changed = node.set_running(running);
        if changed && running {
            // While it was stopped the node lifecycle controller may have
            // set its conditions Unknown: report in full at once, as a
            // kubelet comparing with the server's copy would, rather than
            // trust what it last sent.
            node.state.lock().status = None;
            self.leases.renew_now(name);
            self.status.check_now(name);
            self.pods.resync_node(name);
        }
        if changed {
            tracing::info!(
                node = name,
                running,
                "node {}",
                if running { "started" } else { "stopped" }
            );
            metrics::running_nodes(self.running().len());
        }
        Some(changed)
    }

    /// Stops or starts every node.
    pub fn set_all_running(&self, running: bool) {
        for node in self.fleet.all() {
            self.set_running(&node.name, running);
        }
    }

    /// The names of the running nodes.
    pub fn running(&self) -> Vec<String> {
        self.fleet
            .all()
            .iter()
            .filter(|n| n.is_running())
            .map(|n| n.name.clone())
            .collect()
    }
}
