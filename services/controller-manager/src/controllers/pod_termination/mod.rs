//! Ends graceful pod deletions no kubelet will end. A pod bound to a node
//! is deleted gracefully: its kubelet stops the containers and then
//! deletes it for good. Simulated nodes (`capstan-nodes`) do that for
//! their pods; for a pod bound to a node that does not exist, nobody
//! would, and kube's pod garbage collector deletes such orphans. This
//! controller does that part: when a terminating pod's grace period is
//! over and its node has no Node object, it deletes the pod with grace 0
//! (as `kubectl delete --force --grace-period=0`). Pods on existing nodes
//! are left to their kubelet, as in kube.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::chrono::Utc;

use crate::context::{Context, Reconciler};
use crate::error::Result;
use crate::pod_control::delete_same_pod;
use crate::pods;

pub const ACCOUNT: &str = "pod-garbage-collector";
const QUEUE: &str = "pod_termination";

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let q = queue.clone();
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        let pod = event.object();
        let bound = !pods::node_name(pod).is_empty();
        if pods::is_terminating(pod) && bound && !matches!(event, InformerEvent::Deleted(_)) {
            q.add(event.key());
        }
    });
    if !ctx.until_synced(&[&pods, &nodes]).await {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        pods: pods.store(),
        nodes: nodes.store(),
        client,
        queue: queue.clone(),
    });
    ctx.serve(QUEUE, queue, 2, syncer).await;
    Ok(())
}

pub struct Syncer {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub client: kube::Client,
    pub queue: WorkQueue<String>,
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(pod) = self.pods.get_by_key(key) else {
            return Ok(());
        };
        let Some(deadline) = pod.metadata.deletion_timestamp.as_ref() else {
            return Ok(());
        };
        let node = pods::node_name(&pod);
        if node.is_empty() || self.nodes.get(None, node).is_some() {
            return Ok(());
        }
        // deletionTimestamp is when the grace period ends.
        let left = (deadline.0 - Utc::now()).to_std().unwrap_or_default();
        if !left.is_zero() {
            self.queue
                .add_after(key.to_string(), left + Duration::from_millis(100));
            return Ok(());
        }
        delete_same_pod(&self.client, &pod, Some(0)).await
    }
}
