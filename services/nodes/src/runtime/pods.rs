//! The pods side of every node: one watch for the whole process (every
//! pod bound to a node, `spec.nodeName!=`), each pod dispatched to the
//! node that owns it, as kwok does, and synced by a pool of workers:
//! admitted or refused, then moved along its lifecycle with at most one
//! status write per sync, and looked at again when its next change is due.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::events::EventType;
use capstan_client::informer::{indexes, strip_for_cache, Informer, InformerEvent};
use capstan_client::queue::{run_workers, ItemExponentialFailureRateLimiter, WorkQueue};
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

use super::fleet::{Admission, SharedFleet, SimNode};
use super::{metrics, writes};
use crate::error::Error;
use crate::pod::annotations::Plan;
use crate::pod::lifecycle::{self, Environment};

/// Pods synced at once.
const WORKERS: usize = 32;

pub struct PodSyncer {
    fleet: SharedFleet,
    pods: Informer<Pod>,
    queue: WorkQueue<String>,
    /// Each pod as our last write returned it, until the watch delivers
    /// that version (or a newer one): a sync that runs before the watch
    /// catches up starts from what was written, not from the older copy.
    written: Mutex<HashMap<String, Arc<Pod>>>,
    finishing_run: Duration,
}

impl PodSyncer {
    pub fn new(fleet: SharedFleet, pods: Informer<Pod>, finishing_run: Duration) -> Arc<PodSyncer> {
        // Retries back off to 30 s at most, so that once the API comes
        // back every pod is reconciled soon.
        let limiter = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(30),
        );
        let syncer = Arc::new(PodSyncer {
            fleet,
            pods: pods.clone(),
            queue: WorkQueue::with_rate_limiter("pods", limiter),
            written: Mutex::new(HashMap::new()),
            finishing_run,
        });
        let handler = Arc::downgrade(&syncer);
        pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
        pods.add_handler(move |event: &InformerEvent<Pod>| {
            if let Some(syncer) = handler.upgrade() {
                syncer.observe(event);
            }
        });
        syncer
    }

    fn observe(&self, event: &InformerEvent<Pod>) {
        let pod = event.object();
        let Some(node) = self.fleet.owner_of(pod) else {
            return;
        };
        let key = event.key();
        match event {
            InformerEvent::Deleted(_) => {
                node.release(pod.metadata.uid.as_deref().unwrap_or_default());
                self.written.lock().remove(&key);
            }
            _ => {
                self.forget_seen_write(&key, pod);
                self.queue.add(key);
            }
        }
    }

    /// Drops our last write of `key` once the watch delivered it (or a
    /// newer version), so the map holds only writes still in flight
    /// rather than a second copy of every pod the nodes ever wrote.
    fn forget_seen_write(&self, key: &str, watched: &Pod) {
        let mut written = self.written.lock();
        if written.get(key).is_some_and(|ours| !newer(ours, watched)) {
            written.remove(key);
        }
    }

    /// Counts the pods that were running on `node` before this process
    /// started, oldest first, before any new pod is admitted beside them.
    pub fn readmit_running(&self, node: &SimNode) {
        let mut pods = self
            .pods
            .store()
            .by_index(indexes::BY_NODE_NAME, &node.name);
        pods.retain(|p| {
            let status = p.status.as_ref();
            status.is_some_and(|s| s.start_time.is_some())
                && !status.is_some_and(lifecycle::is_terminal)
        });
        pods.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp)
        });
        for pod in pods {
            node.admit(&pod, &self.fleet.allocatable);
            node.pod_ip(&pod);
        }
    }

    /// Syncs every pod of `node` (it was started again).
    pub fn resync_node(&self, node: &str) {
        for key in self.pods.store().keys_by_index(indexes::BY_NODE_NAME, node) {
            self.queue.add(key);
        }
    }

    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    /// The process's pods watch.
    pub fn pods(&self) -> &Informer<Pod> {
        &self.pods
    }

    pub async fn run(self: Arc<Self>) {
        let syncer = self.clone();
        run_workers(self.queue.clone(), WORKERS, move |key: String| {
            let syncer = syncer.clone();
            async move { syncer.sync(&key).await }
        })
        .await;
    }

    /// The newer of the watch's copy and our last write.
    fn current(&self, key: &str) -> Option<Arc<Pod>> {
        let watched = self.pods.store().get_by_key(key)?;
        let mut written = self.written.lock();
        let Some(ours) = written.get(key) else {
            return Some(watched);
        };
        if newer(ours, &watched) {
            Some(ours.clone())
        } else {
            written.remove(key);
            Some(watched)
        }
    }

    async fn sync(&self, key: &str) -> Result<(), Error> {
        let Some(pod) = self.current(key) else {
            return Ok(());
        };
        let Some(node) = self.fleet.owner_of(&pod).cloned() else {
            return Ok(());
        };
        if !node.is_running() {
            return Ok(());
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let terminal = pod.status.as_ref().is_some_and(lifecycle::is_terminal);
        if terminal {
            node.release(&uid);
        }
        let (plan, warnings) = Plan::parse(pod.metadata.annotations.as_ref());
        if !terminal {
            match node.admit(&pod, &self.fleet.allocatable) {
                Admission::Rejected(rejection) => {
                    return self.reject(&node, &pod, &rejection).await
                }
                Admission::Admitted { first: true } => {
                    for warning in warnings {
                        node.recorder().record(
                            pod.as_ref(),
                            EventType::Warning,
                            "InvalidAnnotation",
                            warning.0,
                        );
                    }
                }
                Admission::Admitted { first: false } => {}
            }
        }
        let pod_ip = if terminal { None } else { node.pod_ip(&pod) };
        let env = Environment {
            host_ip: &self.fleet.template.address,
            pod_ip: pod_ip.as_deref(),
            finishing_run: self.finishing_run,
        };
        let now = Utc::now();
        let next = lifecycle::advance(&pod, &plan, &env, now);
        if let Some(status) = &next.status {
            let result = writes::pod_status(&node.client, &pod, status).await;
            metrics::pod_status_written(result.is_ok());
            let mut written = result?;
            // Kept only until the watch catches up, but without the
            // managed fields, which are most of a pod's decoded size.
            strip_for_cache(&mut written);
            self.written
                .lock()
                .insert(key.to_string(), Arc::new(written));
            if lifecycle::is_terminal(status) {
                node.release(&uid);
            }
        }
        if next.delete {
            writes::delete_pod(&node.client, &pod).await?;
            metrics::pod_deleted();
        }
        if let Some(at) = next.wake_at {
            let delay = (at - Utc::now()).to_std().unwrap_or_default();
            self.queue.add_after(key.to_string(), delay);
        }
        Ok(())
    }

    async fn reject(
        &self,
        node: &SimNode,
        pod: &Pod,
        rejection: &crate::pod::admission::Rejection,
    ) -> Result<(), Error> {
        let status = lifecycle::rejected(pod, &rejection.reason, &rejection.message);
        writes::pod_status(&node.client, pod, &status).await?;
        metrics::pod_rejected(&rejection.reason);
        node.recorder().record(
            pod,
            EventType::Warning,
            &rejection.reason,
            rejection.message.clone(),
        );
        Ok(())
    }
}

/// Whether `ours` (our last write) is a newer version of the same pod
/// than `watched`.
fn newer(ours: &Pod, watched: &Pod) -> bool {
    let version = |p: &Pod| p.metadata.resource_version.as_deref()?.parse::<u64>().ok();
    ours.metadata.uid == watched.metadata.uid
        && matches!((version(ours), version(watched)), (Some(o), Some(w)) if o > w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, version: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": version}
        }))
        .unwrap()
    }

    #[test]
    fn our_write_is_newer_only_for_the_same_pod_at_a_later_version() {
        assert!(newer(&pod("a", "12"), &pod("a", "9")));
        assert!(!newer(&pod("a", "9"), &pod("a", "9")));
        assert!(!newer(&pod("a", "9"), &pod("a", "12")));
        assert!(!newer(&pod("b", "12"), &pod("a", "9")));
        assert!(!newer(&pod("a", "x"), &pod("a", "9")));
    }
}
