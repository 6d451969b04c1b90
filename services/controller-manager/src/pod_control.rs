//! Creating and deleting pods for an owner, as kube's `PodControl` and
//! its helpers do: pods made from the owner's template with a controller
//! reference, created in slow-start batches (1, 2, 4, ...) so a refusal
//! (quota, admission) stops the flood after a few attempts, at most
//! [`BURST_REPLICAS`] per sync; events `SuccessfulCreate`, `FailedCreate`,
//! `SuccessfulDelete`, `FailedDelete` on the owner; and the order in which
//! surplus pods are chosen for deletion.

use std::cmp::Ordering;
use std::future::Future;
use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::Resource;

use crate::error::{Error, Result};
use crate::pods;

/// The most pods one sync creates or deletes (kube's BurstReplicas).
pub const BURST_REPLICAS: usize = 500;

/// The first slow-start batch.
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// kube's annotation that orders pods for scale-down (lower first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A pod as `template` describes it, owned by `owner`, named from
/// `generate_name` by the API server.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner: &OwnerReference,
    generate_name: &str,
) -> Pod {
    let from = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name.to_string()),
            labels: from.labels,
            annotations: from.annotations,
            finalizers: from.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Runs `make(i)` for `count` items in batches of 1, 2, 4, ... (each
/// batch at once), stopping after the first batch with a failure. Returns
/// how many succeeded and the first error; the items of batches never
/// started are neither.
pub async fn slow_start_batch<F, Fut>(
    count: usize,
    initial: usize,
    make: F,
) -> (usize, Option<Error>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut done = 0;
    let mut batch = initial.max(1).min(count);
    while done < count {
        let results = join_all((done..done + batch).map(&make)).await;
        let mut first = None;
        let mut succeeded = 0;
        for result in results {
            match result {
                Ok(()) => succeeded += 1,
                Err(err) if first.is_none() => first = Some(err),
                Err(_) => {}
            }
        }
        done += batch;
        if first.is_some() {
            return (done - batch + succeeded, first);
        }
        batch = (2 * batch).min(count - done);
    }
    (done, None)
}

/// Writes pods for one controller, with its identity and its events.
#[derive(Clone)]
pub struct PodControl {
    client: kube::Client,
    recorder: EventRecorder,
}

impl PodControl {
    pub fn new(client: kube::Client, recorder: EventRecorder) -> PodControl {
        PodControl { client, recorder }
    }

    /// Creates one pod from `pod` in `namespace`; records the event on
    /// `owner`. A namespace being terminated is not worth an event.
    pub async fn create<O: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        pod: &Pod,
        owner: &O,
    ) -> Result<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), pod).await {
            Ok(created) => {
                let name = created.metadata.name.as_deref().unwrap_or_default();
                let message = format!("Created pod: {name}");
                self.recorder
                    .record(owner, EventType::Normal, "SuccessfulCreate", message);
                Ok(created)
            }
            Err(err) => {
                let err = Error::from(err);
                if !err.is_namespace_terminating() {
                    let message = format!("Error creating: {}", err.api_message());
                    self.recorder
                        .record(owner, EventType::Warning, "FailedCreate", message);
                }
                Err(err)
            }
        }
    }

    /// Deletes the pod if it still has `uid`; a pod already gone counts as
    /// deleted.
    pub async fn delete<O: Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        owner: &O,
    ) -> Result<()> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => {
                let message = format!("Deleted pod: {name}");
                self.recorder
                    .record(owner, EventType::Normal, "SuccessfulDelete", message);
                Ok(())
            }
            Err(err) => {
                let err = Error::from(err);
                if err.is_not_found() || err.is_conflict() {
                    return Ok(());
                }
                let message = format!("Error deleting: {}", err.api_message());
                self.recorder
                    .record(owner, EventType::Warning, "FailedDelete", message);
                Err(err)
            }
        }
    }

    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

/// Deletes `pod` if the name still holds the same pod (its uid), with
/// `grace` seconds (None: the pod's own); a pod already gone, or
/// replaced by another of the same name, counts as done.
pub async fn delete_same_pod(client: &kube::Client, pod: &Pod, grace: Option<u32>) -> Result<()> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: grace,
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await.map_err(Error::from) {
        Err(err) if !(err.is_not_found() || err.is_conflict()) => Err(err),
        _ => Ok(()),
    }
}

/// The `diff` pods of `candidates` to delete first, kube's order: pods
/// not on a node, then pending, unknown, running; not ready before ready;
/// lower deletion cost; more pods of `related` sharing their node; ready
/// for less time; more restarts; newer.
pub fn pods_to_delete(
    candidates: &[Arc<Pod>],
    related: &[Arc<Pod>],
    diff: usize,
    now: DateTime<Utc>,
) -> Vec<Arc<Pod>> {
    if diff >= candidates.len() {
        return candidates.to_vec();
    }
    let mut on_node: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for pod in related.iter().filter(|p| pods::is_active(p)) {
        *on_node.entry(pods::node_name(pod)).or_default() += 1;
    }
    let mut ranked: Vec<(usize, &Arc<Pod>)> = candidates
        .iter()
        .map(|p| (on_node.get(pods::node_name(p)).copied().unwrap_or(0), p))
        .collect();
    ranked.sort_by(|a, b| deletion_order(a.1, a.0, b.1, b.0, now));
    ranked
        .into_iter()
        .take(diff)
        .map(|(_, p)| p.clone())
        .collect()
}

fn phase_rank(pod: &Pod) -> u8 {
    match pods::phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i64 {
    let annotations = pod.metadata.annotations.as_ref();
    let cost = annotations.and_then(|a| a.get(DELETION_COST));
    cost.and_then(|c| c.parse::<i32>().ok())
        .map_or(0, i64::from)
}

/// Durations compared on a log scale, as kube's LogarithmicScaleDown
/// does, so pods made or readied moments apart are not told apart by it.
fn log_bucket(since: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    match since {
        None => -1,
        Some(at) => {
            let nanos = (now - at).num_nanoseconds().unwrap_or(i64::MAX).max(1);
            i64::from(63 - nanos.leading_zeros() as i32)
        }
    }
}

/// `Less` means `a` goes first.
fn deletion_order(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize, now: DateTime<Utc>) -> Ordering {
    let assigned = |p: &Pod| !pods::node_name(p).is_empty();
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    assigned(a)
        .cmp(&assigned(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(pods::is_ready(a).cmp(&pods::is_ready(b)))
        .then(deletion_cost(a).cmp(&deletion_cost(b)))
        .then(rank_b.cmp(&rank_a))
        .then_with(|| match pods::is_ready(a) && pods::is_ready(b) {
            true => {
                log_bucket(pods::ready_since(a), now).cmp(&log_bucket(pods::ready_since(b), now))
            }
            false => Ordering::Equal,
        })
        .then(pods::restarts(b).cmp(&pods::restarts(a)))
        .then_with(|| log_bucket(created(a), now).cmp(&log_bucket(created(b), now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::fixtures::pod;
    use k8s_openapi::chrono::Duration;
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

    #[tokio::test]
    async fn slow_start_doubles_and_stops_at_the_first_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (done, err) = slow_start_batch(10, 1, |_| async {
            calls.fetch_add(1, AtomicOrdering::SeqCst);
            Ok(())
        })
        .await;
        assert_eq!((done, err.is_none()), (10, true));
        assert_eq!(calls.load(AtomicOrdering::SeqCst), 10);

        // Items 0..3 succeed, the 4th (in the third batch: 3..7) fails:
        // batches 1 + 2 + 4 ran, 8 skipped.
        let calls = AtomicUsize::new(0);
        let (done, err) = slow_start_batch(15, 1, |i| {
            calls.fetch_add(1, AtomicOrdering::SeqCst);
            async move {
                match i {
                    4 => Err(Error::Invalid("refused".into())),
                    _ => Ok(()),
                }
            }
        })
        .await;
        assert_eq!(calls.load(AtomicOrdering::SeqCst), 7);
        assert_eq!(done, 6);
        assert!(err.is_some());
    }

    fn on(mut pod: Pod, node: &str) -> Pod {
        pod.spec.as_mut().unwrap().node_name = Some(node.into());
        pod
    }

    #[test]
    fn deletion_order_is_kubes() {
        let now = Utc::now();
        let long_ago = Some(now - Duration::hours(5));
        let unassigned = pod("unassigned", "Pending", None);
        let pending = on(pod("pending", "Pending", None), "n1");
        let not_ready = on(pod("not-ready", "Running", None), "n1");
        let ready_new = on(
            pod("ready-new", "Running", Some(now - Duration::seconds(2))),
            "n2",
        );
        let ready_old = on(pod("ready-old", "Running", long_ago), "n2");
        let mut cheap = on(pod("cheap", "Running", long_ago), "n3");
        cheap.metadata.annotations = Some([(DELETION_COST.to_string(), "-10".to_string())].into());
        let all: Vec<Arc<Pod>> = [
            &ready_old,
            &cheap,
            &ready_new,
            &not_ready,
            &pending,
            &unassigned,
        ]
        .into_iter()
        .map(|p| Arc::new(p.clone()))
        .collect();
        let order: Vec<String> = pods_to_delete(&all, &all, 5, now)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            order,
            ["unassigned", "pending", "not-ready", "cheap", "ready-new"]
        );
    }

    #[test]
    fn doubled_up_nodes_lose_pods_first() {
        let now = Utc::now();
        let since = Some(now - Duration::hours(1));
        let crowded: Vec<Arc<Pod>> = (0..3)
            .map(|i| Arc::new(on(pod(&format!("crowded-{i}"), "Running", since), "busy")))
            .collect();
        let alone = Arc::new(on(pod("alone", "Running", since), "quiet"));
        let mut all = crowded.clone();
        all.push(alone);
        let chosen = pods_to_delete(&all, &all, 1, now);
        assert!(chosen[0]
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("crowded"));
    }

    #[test]
    fn a_template_becomes_an_owned_pod() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }))
        .unwrap();
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-1".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let pod = pod_from_template(&template, &owner, "web-1-");
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-1-"));
        assert_eq!(pod.metadata.labels.unwrap()["app"], "web");
        assert_eq!(pod.metadata.owner_references.unwrap()[0].uid, "u1");
        assert_eq!(
            pod.spec.unwrap().containers[0].image.as_deref(),
            Some("nginx")
        );
    }
}
