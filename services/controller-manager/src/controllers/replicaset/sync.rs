//! One ReplicaSet's (or ReplicationController's) reconcile, kube's
//! `syncReplicaSet`: claim the active pods its selector matches, create
//! or delete the difference (unless expectations from the last sync are
//! still pending), then write the status.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::Utc;
use kube::api::Api;
use kube::core::Selector;

use super::kind::Replicated;
use super::status::{calculate, needs_update, Failure};
use crate::context::Reconciler;
use crate::error::{Error, Result};
use crate::expectations::Expectations;
use crate::ownership::{self, controller_ref, Claim, BY_CONTROLLER, ORPHANS};
use crate::pod_control::{self, PodControl, BURST_REPLICAS, SLOW_START_INITIAL_BATCH};
use crate::status::update_derived_status;
use crate::{metrics, pods};

/// What the reconcile reads and writes.
pub struct Syncer<K: Replicated> {
    pub owners: Store<K>,
    pub pods: Store<Pod>,
    pub expectations: Expectations,
    pub control: PodControl,
    /// For a look again once pods become available (minReadySeconds).
    pub queue: Option<WorkQueue<String>>,
}

impl<K: Replicated> Reconciler for Syncer<K> {
    /// Syncs the object with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(owner) = self.owners.get_by_key(key) else {
            self.expectations.forget(key);
            return Ok(());
        };
        let selector = match owner.selector() {
            Ok(selector) => selector,
            Err(reason) => {
                // The API server validates selectors: this cannot be fixed
                // by retrying, only by the user.
                tracing::warn!(%key, %reason, "invalid selector; not syncing");
                return Ok(());
            }
        };
        let wanted_sync = self.expectations.satisfied(key);
        let pods = self.claim_pods(&owner, &selector).await?;
        let deleting = owner.meta().deletion_timestamp.is_some();
        let managed = match wanted_sync && !deleting {
            true => self.manage_replicas(key, &owner, &pods).await,
            false => Ok(()),
        };
        let failure = managed.as_ref().err().map(|e| Failure {
            creating: (pods.len() as i32) < owner.replicas(),
            message: e.api_message(),
        });
        let status = calculate(owner.as_ref(), &pods, failure.as_ref(), Utc::now());
        if needs_update(owner.as_ref(), &status) {
            self.write_status(&owner, &status).await?;
        }
        self.recheck_availability(key, owner.as_ref(), &status, managed.is_ok());
        managed
    }
}

impl<K: Replicated> Syncer<K> {
    /// The active pods this owner controls, after adoption and release.
    async fn claim_pods(&self, owner: &Arc<K>, selector: &Selector) -> Result<Vec<Arc<Pod>>> {
        let meta = owner.meta();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        let active =
            |list: Vec<Arc<Pod>>| list.into_iter().filter(|p| pods::is_active(p)).collect();
        let owned: Vec<Arc<Pod>> = active(self.pods.by_index(BY_CONTROLLER, &uid));
        let orphans: Vec<Arc<Pod>> = active(self.pods.by_index(ORPHANS, &namespace));
        let client = self.control.client().clone();
        let reference = controller_ref(owner.as_ref());
        let claim = Claim {
            api: Api::<Pod>::namespaced(client.clone(), &namespace),
            owner: reference.clone(),
            owner_deleting: meta.deletion_timestamp.is_some(),
            selector,
        };
        let owners: Api<K> = Api::namespaced(client, &namespace);
        let claimed = claim
            .claim(owned, orphans, || {
                ownership::still_adoptable(&owners, &reference)
            })
            .await?;
        Ok(claimed.into_iter().filter(|p| pods::is_active(p)).collect())
    }

    /// Creates or deletes the difference between the pods and the spec.
    async fn manage_replicas(&self, key: &str, owner: &Arc<K>, pods: &[Arc<Pod>]) -> Result<()> {
        let diff = pods.len() as i64 - i64::from(owner.replicas().max(0));
        if diff < 0 {
            let count = (-diff as usize).min(BURST_REPLICAS);
            return self.create(key, owner, count).await;
        }
        if diff > 0 {
            let count = (diff as usize).min(BURST_REPLICAS);
            return self.delete(key, owner, pods, count).await;
        }
        Ok(())
    }

    async fn create(&self, key: &str, owner: &Arc<K>, count: usize) -> Result<()> {
        let Some(template) = owner.template() else {
            return Err(Error::Invalid(format!("{key} has no pod template")));
        };
        let name = owner.meta().name.clone().unwrap_or_default();
        let namespace = owner.meta().namespace.clone().unwrap_or_default();
        let pod = pod_control::pod_from_template(
            template,
            &controller_ref(owner.as_ref()),
            &format!("{name}-"),
        );
        self.expectations.expect_creations(key, count);
        let make = |_| async {
            match self.control.create(&namespace, &pod, owner.as_ref()).await {
                Ok(_) => Ok(()),
                // The namespace is going: the pods would be deleted anyway.
                Err(err) if err.is_namespace_terminating() => Ok(()),
                Err(err) => Err(err),
            }
        };
        let (created, failed) =
            pod_control::slow_start_batch(count, SLOW_START_INITIAL_BATCH, make).await;
        metrics::pods(K::ACCOUNT, "created", created);
        if created < count {
            // The watch will never show the pods that were not made.
            self.expectations.lower_creations(key, count - created);
            metrics::pods(K::ACCOUNT, "create_failed", count - created);
        }
        match failed {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    async fn delete(
        &self,
        key: &str,
        owner: &Arc<K>,
        pods: &[Arc<Pod>],
        count: usize,
    ) -> Result<()> {
        let related = self.related_pods(owner.as_ref());
        let doomed = pod_control::pods_to_delete(pods, &related, count, Utc::now());
        let uids: Vec<String> = doomed
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        self.expectations.expect_deletions(key, uids);
        let namespace = owner.meta().namespace.clone().unwrap_or_default();
        let deletions = doomed.iter().map(|pod| async {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let result = self
                .control
                .delete(&namespace, name, uid, owner.as_ref())
                .await;
            if result.is_err() {
                // Not deleted: its deletion will never be observed.
                self.expectations.deletion_observed(key, uid);
            }
            result
        });
        let results = futures::future::join_all(deletions).await;
        let failed = results
            .into_iter()
            .filter_map(|r| r.err())
            .collect::<Vec<_>>();
        metrics::pods(K::ACCOUNT, "deleted", doomed.len() - failed.len());
        match failed.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Pods of every object controlled by the same owner (a Deployment's
    /// ReplicaSets), to spread deletions away from crowded nodes.
    fn related_pods(&self, owner: &K) -> Vec<Arc<Pod>> {
        let own_uid = owner.meta().uid.clone().unwrap_or_default();
        let siblings: Vec<String> = match ownership::controller_uid(owner.meta()) {
            Some(parent) => self
                .owners
                .by_index(BY_CONTROLLER, parent)
                .iter()
                .filter_map(|s| s.meta().uid.clone())
                .collect(),
            None => vec![own_uid],
        };
        siblings
            .iter()
            .flat_map(|uid| self.pods.by_index(BY_CONTROLLER, uid))
            .collect()
    }

    async fn write_status(&self, owner: &Arc<K>, status: &ReplicaSetStatus) -> Result<()> {
        let meta = owner.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let api: Api<K> = Api::namespaced(self.control.client().clone(), namespace);
        update_derived_status(&api, owner.as_ref(), |o| o.set_status(status)).await?;
        Ok(())
    }

    /// Pods ready but not yet available count once minReadySeconds pass:
    /// look again then.
    fn recheck_availability(&self, key: &str, owner: &K, status: &ReplicaSetStatus, managed: bool) {
        let min_ready = owner.min_ready_seconds();
        let waiting = status.ready_replicas.unwrap_or(0) > status.available_replicas.unwrap_or(0);
        if let (true, true, true, Some(queue)) = (managed, min_ready > 0, waiting, &self.queue) {
            queue.add_after(key.to_string(), Duration::from_secs(min_ready as u64));
        }
    }
}
