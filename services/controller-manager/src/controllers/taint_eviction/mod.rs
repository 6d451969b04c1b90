//! The taint-eviction controller (kube's NoExecute taint manager): a pod
//! bound to a node with NoExecute taints it does not tolerate is deleted
//! at once; one that tolerates them for `tolerationSeconds` is deleted
//! when that runs out, unless the taints go first. The node lifecycle
//! controller puts the `unreachable` / `not-ready` taints on at its
//! zones' eviction rates, so the rate limits live there.
//!
//! Wiring: pods (indexed by node) and nodes. A node whose NoExecute
//! taints change queues its pods; a pod newly bound, or whose
//! tolerations change, on a node with such taints is queued; a pod that
//! may stay for a while is queued again for its deadline.

pub mod decide;
pub mod sync;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use capstan_client::informer::{indexes, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::{Node, Pod};
use parking_lot::Mutex;

use crate::context::Context;
use crate::error::Result;
use decide::{no_execute_changed, no_execute_taints};
pub use sync::Evictor;

/// kube's taint manager acts with the node controller's role.
pub const ACCOUNT: &str = "node-controller";
const COMPONENT: &str = "taint-eviction-controller";
const QUEUE: &str = "taint_eviction";
const WORKERS: usize = 8;

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, COMPONENT);
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
    let queue = WorkQueue::<String>::new(QUEUE);
    let (q, pod_store) = (queue.clone(), pods.store());
    nodes.add_handler(move |event: &InformerEvent<Node>| on_node(event, &pod_store, &q));
    let (q, node_store) = (queue.clone(), nodes.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| on_pod(event, &node_store, &q));
    if !ctx.until_synced(&[&nodes, &pods]).await {
        return Ok(());
    }
    let evictor = Arc::new(Evictor {
        pods: pods.store(),
        nodes: nodes.store(),
        client,
        recorder,
        queue: Some(queue.clone()),
        scheduled: Mutex::new(HashMap::new()),
    });
    ctx.serve(QUEUE, queue, WORKERS, evictor).await;
    Ok(())
}

/// Queues the pods of a node whose NoExecute taints changed.
fn on_node(event: &InformerEvent<Node>, pods: &Store<Pod>, queue: &WorkQueue<String>) {
    let changed = match event {
        InformerEvent::Added(node) => !no_execute_taints(node).is_empty(),
        InformerEvent::Updated { old, new } => no_execute_changed(old, new),
        InformerEvent::Deleted(_) => false,
    };
    if !changed {
        return;
    }
    let name = event.object().metadata.name.as_deref().unwrap_or_default();
    for key in pods.keys_by_index(indexes::BY_NODE_NAME, name) {
        queue.add(key);
    }
}

/// Queues a pod newly on a tainted node, or whose tolerations changed there.
fn on_pod(event: &InformerEvent<Pod>, nodes: &Store<Node>, queue: &WorkQueue<String>) {
    let tolerations = |pod: &Pod| pod.spec.as_ref().and_then(|s| s.tolerations.clone());
    let relevant = match event {
        InformerEvent::Added(_) => true,
        InformerEvent::Updated { old, new } => {
            crate::pods::node_name(old) != crate::pods::node_name(new)
                || tolerations(old) != tolerations(new)
        }
        // Its key may wait for a deadline: the look finds it gone.
        InformerEvent::Deleted(_) => false,
    };
    let pod = event.object();
    let node = crate::pods::node_name(pod);
    if !relevant || node.is_empty() || crate::pods::is_terminating(pod) {
        return;
    }
    if nodes
        .get(None, node)
        .is_some_and(|n| !no_execute_taints(&n).is_empty())
    {
        queue.add(event.key());
    }
}
