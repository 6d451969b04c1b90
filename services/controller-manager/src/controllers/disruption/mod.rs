//! The disruption controller: each PodDisruptionBudget's status (pods
//! expected and healthy, disruptions allowed, the pods the eviction API
//! let go, the DisruptionAllowed condition), which the API server's
//! `pods/eviction` consults before it deletes a pod; and the withdrawal
//! of DisruptionTarget marks on pods that were never deleted.
//!
//! Wiring: budgets, pods, and the pod owners whose scale a percentage is
//! taken of (ReplicaSets, Deployments, ReplicationControllers,
//! StatefulSets). A budget's events enqueue it; a pod's enqueue every
//! budget in its namespace that selects it (before and after a label
//! change), and a marked pod goes on the stale-mark queue for when its
//! mark would be stale.

mod expected;
pub mod stale;
pub mod status;
pub mod sync;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::informer::{key_of, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::SelectorExt;

use crate::context::Context;
use crate::error::Result;
use crate::scale::Scales;
pub use expected::{Expected, Finders};
use sync::Syncer;

pub const ACCOUNT: &str = "disruption-controller";
const QUEUE: &str = "disruption";
const STALE_QUEUE: &str = "stale_pod_disruption";

/// The budgets in `namespace` whose selector matches `labels`.
pub fn budgets_selecting(
    budgets: &Store<PodDisruptionBudget>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Vec<String> {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    budgets
        .list_namespace(namespace)
        .iter()
        .filter(|b| matches!(sync::selector(b), Ok(Some(s)) if s.matches(labels)))
        .map(|b| key_of(b.as_ref()))
        .collect()
}

fn on_pod_event(
    budgets: &Store<PodDisruptionBudget>,
    queue: &WorkQueue<String>,
    event: &InformerEvent<Pod>,
) {
    let pod = event.object();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut keys = budgets_selecting(budgets, namespace, pod.metadata.labels.as_ref());
    if let InformerEvent::Updated { old, new } = event {
        if old.metadata.labels != new.metadata.labels {
            keys.extend(budgets_selecting(
                budgets,
                namespace,
                old.metadata.labels.as_ref(),
            ));
        }
    }
    keys.into_iter().for_each(|key| queue.add(key));
}

pub async fn run(ctx: Arc<Context>) -> Result<()> {
    let client = ctx.client_for(ACCOUNT).await?;
    let recorder = ctx.recorder(&client, ACCOUNT);
    let budgets = ctx.informers.get::<PodDisruptionBudget>();
    let pods = ctx.informers.get::<Pod>();
    let replica_sets = ctx.informers.get::<ReplicaSet>();
    let deployments = ctx.informers.get::<Deployment>();
    let controllers = ctx.informers.get::<ReplicationController>();
    let stateful_sets = ctx.informers.get::<StatefulSet>();
    let queue = WorkQueue::<String>::new(QUEUE);
    let stale_queue = WorkQueue::<String>::new(STALE_QUEUE);
    let q = queue.clone();
    budgets.add_handler(move |event: &InformerEvent<PodDisruptionBudget>| q.add(event.key()));
    let (q, sq, store) = (queue.clone(), stale_queue.clone(), budgets.store());
    pods.add_handler(move |event: &InformerEvent<Pod>| {
        on_pod_event(&store, &q, event);
        stale::on_pod_event(event, &sq);
    });
    if !ctx
        .until_synced(&[
            &budgets,
            &pods,
            &replica_sets,
            &deployments,
            &controllers,
            &stateful_sets,
        ])
        .await
    {
        return Ok(());
    }
    let syncer = Arc::new(Syncer {
        budgets: budgets.store(),
        pods: pods.store(),
        finders: Finders {
            replica_sets: replica_sets.store(),
            deployments: deployments.store(),
            controllers: controllers.store(),
            stateful_sets: stateful_sets.store(),
            scales: Scales::default(),
            client: client.clone(),
        },
        client: client.clone(),
        recorder,
        queue: Some(queue.clone()),
    });
    let (pod_store, sq) = (pods.store(), stale_queue.clone());
    let stale_workers = ctx.run_workers(STALE_QUEUE, stale_queue, 1, move |key| {
        let (pods, client, queue) = (pod_store.clone(), client.clone(), sq.clone());
        async move { stale::sync(&pods, &client, &queue, &key).await }
    });
    let workers = ctx.serve(QUEUE, queue, 1, syncer);
    tokio::join!(workers, stale_workers);
    Ok(())
}
