//! One budget's reconcile, kube's `sync`/`trySync`: its pods, the
//! expected and desired counts, the disrupted pods still awaited, the
//! status written when it changed. A failed sync writes the fail-safe
//! status (no disruption allowed, condition reason SyncFailed) so that
//! the eviction API refuses rather than guesses, then retries.

use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, PostParams};
use kube::core::{Selector, SelectorExt};

use super::expected::Finders;
use super::status;
use crate::context::Reconciler;
use crate::error::{Error, Result};

/// What the reconcile reads and writes.
pub struct Syncer {
    pub budgets: Store<PodDisruptionBudget>,
    pub pods: Store<Pod>,
    pub finders: Finders,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    /// For a look again when an awaited deletion is due.
    pub queue: Option<WorkQueue<String>>,
}

/// The budget's selector: none selects nothing, an empty one every pod.
pub fn selector(pdb: &PodDisruptionBudget) -> std::result::Result<Option<Selector>, String> {
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.clone()) else {
        return Ok(None);
    };
    Selector::try_from(selector).map(Some).map_err(|e| e.0)
}

impl Reconciler for Syncer {
    /// Syncs the budget with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(pdb) = self.budgets.get_by_key(key) else {
            return Ok(());
        };
        let Err(err) = self.try_sync(key, &pdb).await else {
            return Ok(());
        };
        if err.is_conflict() {
            return Err(err);
        }
        tracing::info!(%key, %err, "failed to sync the disruption budget; nothing may be disrupted");
        let safe = status::fail_safe(&pdb, &err.to_string(), Utc::now());
        self.write(&pdb, safe).await?;
        Err(err)
    }
}

impl Syncer {
    fn pods_of(&self, pdb: &PodDisruptionBudget) -> Result<Vec<Arc<Pod>>> {
        let selector = selector(pdb).map_err(|reason| {
            let message = format!("Failed to get pods: {reason}");
            self.recorder
                .record(pdb, EventType::Warning, "NoPods", message);
            Error::Invalid(reason)
        })?;
        let Some(selector) = selector else {
            return Ok(Vec::new());
        };
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        let pods = self.pods.list_namespace(namespace).into_iter();
        let empty = Default::default();
        Ok(pods
            .filter(|p| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
            .collect())
    }

    async fn try_sync(&self, key: &str, pdb: &Arc<PodDisruptionBudget>) -> Result<()> {
        let pods = self.pods_of(pdb)?;
        if pods.is_empty() {
            self.recorder.record(
                pdb.as_ref(),
                EventType::Normal,
                "NoPods",
                "No matching pods found",
            );
        }
        let expected = self.finders.expected(pdb, &pods).await.inspect_err(|err| {
            let message = format!("Failed to calculate the number of expected pods: {err}");
            self.recorder.record(
                pdb.as_ref(),
                EventType::Warning,
                "CalculateExpectedPodCountFailed",
                message,
            );
        })?;
        if !expected.unmanaged.is_empty() {
            self.report_unmanaged(pdb);
        }
        let now = Utc::now();
        let disrupted = status::disrupted(pdb, &pods, now);
        for pod in &disrupted.overdue {
            let message = format!("Pod was expected by PDB {key} to be deleted but it wasn't");
            self.recorder
                .record(pod.as_ref(), EventType::Warning, "NotDeleted", message);
        }
        let healthy = status::healthy(&pods, &disrupted.pods, now);
        let new = status::calculate(pdb, healthy, &expected, disrupted.pods, now);
        if status::differs(pdb, &new) {
            self.write(pdb, new).await?;
        }
        if let (Some(at), Some(queue)) = (disrupted.recheck_at, &self.queue) {
            queue.add_after(key.to_string(), (at - now).to_std().unwrap_or_default());
        }
        Ok(())
    }

    fn report_unmanaged(&self, pdb: &PodDisruptionBudget) {
        let selector = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
        let selector = selector
            .and_then(|s| Selector::try_from(s.clone()).ok())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let message = format!(
            "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be \
             unmanaged. As a result, the status of the PDB cannot be calculated correctly, which \
             may result in undefined behavior. To account for these pods please set \
             \".spec.minAvailable\" field of the PDB to an integer value."
        );
        self.recorder
            .record(pdb, EventType::Warning, "UnmanagedPods", message);
    }

    /// Writes `new` over the status read, conditional on its
    /// resourceVersion: a conflict (the eviction API recorded a disruption
    /// meanwhile) is an error and the budget is computed again, never
    /// written over the eviction's record.
    async fn write(&self, pdb: &PodDisruptionBudget, new: PodDisruptionBudgetStatus) -> Result<()> {
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        let name = pdb.metadata.name.as_deref().unwrap_or_default();
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        let mut updated = pdb.clone();
        updated.status = Some(new);
        let body = serde_json::to_vec(&updated).map_err(|e| Error::Invalid(e.to_string()))?;
        match api.replace_status(name, &PostParams::default(), body).await {
            Ok(_) => Ok(()),
            Err(err) => {
                let err = Error::from(err);
                match err.is_not_found() {
                    true => Ok(()),
                    false => Err(err),
                }
            }
        }
    }
}
