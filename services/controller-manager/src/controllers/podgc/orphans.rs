//! The quarantine of missing nodes, kube's `nodeQueue`: a node a pod is
//! bound to but the cache does not hold may only lag (a watch behind, a
//! node re-registering), so its pods wait for the quarantine, and then
//! the API is asked once whether the node really is gone.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// How long a node confirmed gone is remembered (its pods' deletions seen).
const REMEMBER_GONE: Duration = Duration::from_secs(600);

/// What to do about a pod on a missing node.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Still in quarantine for this long.
    Wait(Duration),
    /// The quarantine is over: ask the API.
    Confirm,
    /// The API said the node is gone.
    Gone,
}

struct Entry {
    since: Instant,
    gone: bool,
}

#[derive(Default)]
pub struct Quarantine {
    nodes: Mutex<HashMap<String, Entry>>,
}

impl Quarantine {
    /// The verdict on `node` (its quarantine starts now if it had none).
    pub fn check(&self, node: &str, period: Duration) -> Verdict {
        let now = Instant::now();
        let mut nodes = self.nodes.lock();
        nodes.retain(|_, e| !e.gone || now.duration_since(e.since) < REMEMBER_GONE);
        let entry = nodes.entry(node.to_string()).or_insert(Entry {
            since: now,
            gone: false,
        });
        let waited = now.duration_since(entry.since);
        match (entry.gone, waited < period) {
            (true, _) => Verdict::Gone,
            (false, true) => Verdict::Wait(period - waited),
            (false, false) => Verdict::Confirm,
        }
    }

    /// The API confirmed `node` is gone.
    pub fn confirm(&self, node: &str) {
        if let Some(entry) = self.nodes.lock().get_mut(node) {
            entry.gone = true;
        }
    }

    /// `node` exists after all.
    pub fn forget(&self, node: &str) {
        self.nodes.lock().remove(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_node_waits_out_its_quarantine_then_is_confirmed_once() {
        let quarantine = Quarantine::default();
        let period = Duration::from_secs(40);
        assert_eq!(quarantine.check("n1", period), Verdict::Wait(period));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(
            quarantine.check("n1", period),
            Verdict::Wait(Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(quarantine.check("n1", period), Verdict::Confirm);
        quarantine.confirm("n1");
        assert_eq!(quarantine.check("n1", period), Verdict::Gone);
        quarantine.forget("n1");
        assert_eq!(quarantine.check("n1", period), Verdict::Wait(period));
        tokio::time::advance(REMEMBER_GONE).await;
        quarantine.confirm("n1");
        tokio::time::advance(REMEMBER_GONE).await;
        quarantine.check("n2", period);
        assert_eq!(quarantine.nodes.lock().len(), 1, "n1 forgotten");
    }
}
