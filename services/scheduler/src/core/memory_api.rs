//! An in-memory stand-in for the API server, for the scheduler's tests and
//! its benchmark: it keeps pods, applies the scheduler's writes with the API
//! server's rules that matter here (a pod binds once; a deleted pod cannot
//! bind), and sends every change back to the scheduler's handlers as a watch
//! would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use parking_lot::Mutex;

use super::api::{ApiError, ApiResult, PodRef, SchedulerApi, SchedulerEvent, StatusPatch};
use super::scheduler::Scheduler;

#[derive(Default)]
pub struct MemoryApi {
    pods: Mutex<HashMap<(String, String), Arc<Pod>>>,
    events: Mutex<Vec<SchedulerEvent>>,
    watcher: Mutex<Option<Weak<Scheduler>>>,
    /// Bindings to refuse (with a conflict) before accepting any.
    refuse_bindings: Mutex<usize>,
    /// Pods stored with a node.
    bound: AtomicUsize,
}

fn now() -> Time {
    Time(k8s_openapi::chrono::Utc::now())
}

impl MemoryApi {
    pub fn new() -> Arc<MemoryApi> {
        Arc::new(MemoryApi::default())
    }

    /// Delivers every change to `scheduler`'s handlers from now on.
    pub fn watch(&self, scheduler: &Arc<Scheduler>) {
        *self.watcher.lock() = Some(Arc::downgrade(scheduler));
    }

    fn scheduler(&self) -> Option<Arc<Scheduler>> {
        self.watcher.lock().as_ref()?.upgrade()
    }

    pub fn create_pod(&self, pod: Pod) {
        let pod = Arc::new(pod);
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some()
        {
            self.bound.fetch_add(1, Ordering::AcqRel);
        }
        self.pods.lock().insert(key(&pod), pod.clone());
        if let Some(scheduler) = self.scheduler() {
            scheduler.on_pod_added(pod);
        }
    }

    pub fn add_node(&self, node: Node) {
        if let Some(scheduler) = self.scheduler() {
            scheduler.on_node_added(Arc::new(node));
        }
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods
            .lock()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods.lock().values().cloned().collect()
    }

    /// Pods bound to a node.
    pub fn bound(&self) -> usize {
        self.bound.load(Ordering::Acquire)
    }

    pub fn events(&self) -> Vec<SchedulerEvent> {
        self.events.lock().clone()
    }

    pub fn refuse_next_bindings(&self, count: usize) {
        *self.refuse_bindings.lock() = count;
    }

    /// Deletes a pod now (a kubelet's final delete, or a user's).
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        let removed = self
            .pods
            .lock()
            .remove(&(namespace.to_string(), name.to_string()));
        if let (Some(pod), Some(scheduler)) = (removed, self.scheduler()) {
            scheduler.on_pod_deleted(pod);
        }
    }

    /// Applies `change` to the stored pod and sends the update to the watcher.
    fn modify(
        &self,
        target: &PodRef,
        change: impl FnOnce(&mut Pod) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let (old, new) = {
            let mut pods = self.pods.lock();
            let slot = pods
                .get_mut(&(target.namespace.clone(), target.name.clone()))
                .filter(|p| {
                    target.uid.is_empty() || p.metadata.uid.as_deref() == Some(target.uid.as_str())
                })
                .ok_or_else(|| ApiError::NotFound(format!("pods {:?} not found", target.name)))?;
            let mut pod = (**slot).clone();
            change(&mut pod)?;
            let new = Arc::new(pod);
            (std::mem::replace(slot, new.clone()), new)
        };
        if let Some(scheduler) = self.scheduler() {
            scheduler.on_pod_updated(old, new);
        }
        Ok(())
    }
}

fn key(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn set_condition(status: &mut PodStatus, condition: PodCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != condition.type_);
    conditions.push(condition);
}

impl SchedulerApi for MemoryApi {
    fn bind(&self, pod: &PodRef, node: &str) -> ApiResult {
        let refused = {
            let mut refuse = self.refuse_bindings.lock();
            let refused = *refuse > 0;
            *refuse = refuse.saturating_sub(1);
            refused
        };
        let result = if refused {
            Err(ApiError::Conflict("binding refused by the test".into()))
        } else {
            self.modify(pod, |p| {
                let spec = p.spec.get_or_insert_with(Default::default);
                if let Some(existing) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                    return Err(ApiError::Conflict(format!(
                        "pod {} is already assigned to node {existing:?}",
                        pod.name
                    )));
                }
                spec.node_name = Some(node.to_string());
                let status = p.status.get_or_insert_with(Default::default);
                set_condition(
                    status,
                    PodCondition {
                        type_: "PodScheduled".into(),
                        status: "True".into(),
                        last_transition_time: Some(now()),
                        ..Default::default()
                    },
                );
                Ok(())
            })
        };
        if result.is_ok() {
            self.bound.fetch_add(1, Ordering::AcqRel);
        }
        async move { result }.boxed()
    }

    fn patch_status(&self, pod: &PodRef, patch: StatusPatch) -> ApiResult {
        let result = self.modify(pod, |p| {
            let status = p.status.get_or_insert_with(Default::default);
            if let Some((reason, message)) = patch.unschedulable {
                set_condition(
                    status,
                    PodCondition {
                        type_: "PodScheduled".into(),
                        status: "False".into(),
                        reason: Some(reason),
                        message: Some(message),
                        last_transition_time: Some(now()),
                        ..Default::default()
                    },
                );
            }
            if let Some(node) = patch.nominated_node_name {
                status.nominated_node_name = (!node.is_empty()).then_some(node);
            }
            Ok(())
        });
        async move { result }.boxed()
    }

    fn preempt(&self, victim: &PodRef, message: &str) -> ApiResult {
        let result = self.modify(victim, |p| {
            let status = p.status.get_or_insert_with(Default::default);
            set_condition(
                status,
                PodCondition {
                    type_: "DisruptionTarget".into(),
                    status: "True".into(),
                    reason: Some("PreemptionByScheduler".into()),
                    message: Some(message.to_string()),
                    last_transition_time: Some(now()),
                    ..Default::default()
                },
            );
            p.metadata.deletion_timestamp = Some(now());
            Ok(())
        });
        // The node's kubelet would stop it and delete it; here that is at once.
        if result.is_ok() {
            self.delete_pod(&victim.namespace, &victim.name);
        }
        async move { result }.boxed()
    }

    fn record(&self, event: SchedulerEvent) {
        self.events.lock().push(event);
    }
}
