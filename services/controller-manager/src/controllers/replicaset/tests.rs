use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Informer;
use capstan_client::testing::{ApiError, FakeApi, Verb};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod, ReplicationController};
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};
use kube::api::{Api, DeleteParams};
use serde_json::json;

use super::kind::Replicated;
use super::sync::Syncer;
use crate::context::{Context, Reconciler};
use crate::expectations::Expectations;
use crate::pod_control::PodControl;
use crate::testkit::{context, eventually, object};

fn replica_set(replicas: i32) -> ReplicaSet {
    object(json!({
        "metadata": {"name": "web", "namespace": "default", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
            },
        },
    }))
}

fn pod_of(name: &str, owner: Option<&ReplicaSet>, labels: serde_json::Value) -> Pod {
    let mut pod: Pod = object(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
        "status": {"phase": "Pending"},
    }));
    if let Some(owner) = owner {
        pod.metadata.owner_references = Some(vec![crate::ownership::controller_ref(owner)]);
    }
    pod
}

fn running(mut pod: Pod, node: &str, ready_for: Option<i64>) -> Pod {
    pod.spec.as_mut().unwrap().node_name = Some(node.into());
    let status = pod.status.as_mut().unwrap();
    status.phase = Some("Running".into());
    if let Some(seconds) = ready_for {
        let since = Utc::now() - ChronoDuration::seconds(seconds);
        status.conditions = Some(vec![object(json!({
            "type": "Ready", "status": "True", "lastTransitionTime": since.to_rfc3339()}))]);
    }
    pod
}

struct Harness<K: Replicated> {
    ctx: Arc<Context>,
    owners: Informer<K>,
    pods: Informer<Pod>,
    syncer: Syncer<K>,
}

async fn harness<K: Replicated>(fake: FakeApi) -> Harness<K> {
    let ctx = context(&fake);
    let owners = ctx.informers.get::<K>();
    owners.add_index(
        crate::ownership::BY_CONTROLLER,
        crate::ownership::by_controller_uid::<K>,
    );
    let pods = super::index_pods(&ctx);
    owners.wait_synced().await;
    pods.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        owners: owners.store(),
        pods: pods.store(),
        expectations: Expectations::new(),
        control: PodControl::new(client.clone(), ctx.recorder(&client, K::ACCOUNT)),
        queue: None,
    };
    Harness {
        ctx,
        owners,
        pods,
        syncer,
    }
}

impl<K: Replicated> Harness<K> {
    /// Waits until the caches hold `owners` owners and `pods` pods.
    async fn caught_up(&self, owners: usize, pods: usize) {
        eventually("the caches to catch up", || async {
            (self.owners.store().len() == owners && self.pods.store().len() == pods).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn creates_the_missing_pods_once_even_with_a_lagging_cache() {
    let fake = FakeApi::new();
    fake.set_watch_delay("pods", Duration::from_millis(500));
    let h = harness::<ReplicaSet>(fake.clone()).await;
    let rs = fake.insert(&replica_set(3));
    h.caught_up(1, 0).await;
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(fake.calls_to(Verb::Create, "pods").len(), 3);
    // The cache has not seen the pods yet: expectations hold the owner.
    assert_eq!(h.syncer.expectations.pending("default/web"), (3, 0));
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(fake.calls_to(Verb::Create, "pods").len(), 3);
    let pods = fake.list::<Pod>();
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        let reference = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(reference.uid, rs.metadata.uid.clone().unwrap());
        assert_eq!(reference.controller, Some(true));
        assert!(pod.metadata.name.as_deref().unwrap().starts_with("web-"));
    }
    // Once the watch shows them, the next sync finds nothing to do.
    for pod in &pods {
        h.syncer.expectations.creation_observed("default/web");
        let _ = pod;
    }
    h.caught_up(1, 3).await;
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(fake.calls_to(Verb::Create, "pods").len(), 3);
    let stored: ReplicaSet = fake.get(Some("default"), "web").unwrap();
    assert_eq!(stored.status.unwrap().replicas, 3);
    let _ = &h.ctx;
}

#[tokio::test]
async fn scales_down_unassigned_and_unready_pods_first() {
    let fake = FakeApi::new();
    let h = harness::<ReplicaSet>(fake.clone()).await;
    let rs = fake.insert(&replica_set(1));
    let labels = json!({"app": "web"});
    fake.insert(&pod_of("unassigned", Some(&rs), labels.clone()));
    fake.insert(&running(
        pod_of("not-ready", Some(&rs), labels.clone()),
        "n1",
        None,
    ));
    fake.insert(&running(pod_of("ready", Some(&rs), labels), "n1", Some(60)));
    h.caught_up(1, 3).await;
    h.syncer.sync("default/web").await.unwrap();
    let deleted: Vec<String> = fake
        .calls_to(Verb::Delete, "pods")
        .iter()
        .map(|c| c.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    assert!(deleted.contains(&"unassigned".to_string()), "{deleted:?}");
    assert!(deleted.contains(&"not-ready".to_string()), "{deleted:?}");
    assert_eq!(h.syncer.expectations.pending("default/web"), (0, 2));
}

#[tokio::test]
async fn adopts_matching_orphans_and_releases_pods_that_stopped_matching() {
    let fake = FakeApi::new();
    let h = harness::<ReplicaSet>(fake.clone()).await;
    let rs = fake.insert(&replica_set(2));
    fake.insert(&pod_of("orphan", None, json!({"app": "web"})));
    fake.insert(&pod_of("stray", Some(&rs), json!({"app": "other"})));
    fake.insert(&pod_of("kept", Some(&rs), json!({"app": "web"})));
    h.caught_up(1, 3).await;
    h.syncer.sync("default/web").await.unwrap();
    let orphan: Pod = fake.get(Some("default"), "orphan").unwrap();
    assert_eq!(
        crate::ownership::controller_uid(&orphan.metadata),
        rs.metadata.uid.as_deref()
    );
    let stray: Pod = fake.get(Some("default"), "stray").unwrap();
    assert!(crate::ownership::controller_of(&stray.metadata).is_none());
    // Adopted + kept = 2: nothing to create.
    assert!(fake.calls_to(Verb::Create, "pods").is_empty());
}

#[tokio::test]
async fn a_refused_create_sets_replica_failure_and_records_failed_create() {
    let fake = FakeApi::new();
    let h = harness::<ReplicaSet>(fake.clone()).await;
    fake.insert(&replica_set(4));
    h.caught_up(1, 0).await;
    let quota = "pods \"web-x\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0";
    fake.fail_next(
        Verb::Create,
        "pods",
        1,
        ApiError::new(403, "Forbidden", quota),
    );
    let err = h.syncer.sync("default/web").await.unwrap_err();
    assert_eq!(err.code(), Some(403));
    // Slow start: one attempt, not four.
    assert_eq!(fake.calls_to(Verb::Create, "pods").len(), 1);
    assert!(h.syncer.expectations.satisfied("default/web"));
    let stored: ReplicaSet = fake.get(Some("default"), "web").unwrap();
    let conditions = stored.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, "ReplicaFailure");
    assert_eq!(conditions[0].reason.as_deref(), Some("FailedCreate"));
    assert!(conditions[0]
        .message
        .as_deref()
        .unwrap()
        .contains("exceeded quota"));
    let event = eventually("the FailedCreate event", || async {
        let events = fake.list::<Event>();
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedCreate"))
    })
    .await;
    assert!(event
        .message
        .unwrap()
        .starts_with("Error creating: pods \"web-x\" is forbidden"));
    // Once creating works again the condition goes.
    h.syncer.sync("default/web").await.unwrap();
    let stored: ReplicaSet = fake.get(Some("default"), "web").unwrap();
    assert!(stored.status.unwrap().conditions.is_none());
}

#[tokio::test]
async fn status_counts_ready_and_available_pods() {
    let fake = FakeApi::new();
    let h = harness::<ReplicaSet>(fake.clone()).await;
    let mut rs = replica_set(3);
    rs.spec.as_mut().unwrap().min_ready_seconds = Some(30);
    let rs = fake.insert(&rs);
    let labels = json!({"app": "web"});
    fake.insert(&running(
        pod_of("a", Some(&rs), labels.clone()),
        "n1",
        Some(60),
    ));
    fake.insert(&running(
        pod_of("b", Some(&rs), labels.clone()),
        "n1",
        Some(5),
    ));
    fake.insert(&running(
        pod_of("c", Some(&rs), json!({"app": "web", "x": "y"})),
        "n1",
        None,
    ));
    h.caught_up(1, 3).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = fake
        .get::<ReplicaSet>(Some("default"), "web")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.replicas, 3);
    assert_eq!(status.ready_replicas, Some(2));
    assert_eq!(status.available_replicas, Some(1));
    assert_eq!(status.fully_labeled_replicas, Some(3));
    assert_eq!(status.observed_generation, Some(1));
}

#[tokio::test]
async fn replication_controllers_use_the_same_controller() {
    let fake = FakeApi::new();
    let h = harness::<ReplicationController>(fake.clone()).await;
    fake.insert(&object::<ReplicationController>(json!({
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"app": "legacy"}, "template": {
            "metadata": {"labels": {"app": "legacy"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })));
    h.caught_up(1, 0).await;
    h.syncer.sync("default/legacy").await.unwrap();
    let pods = fake.list::<Pod>();
    assert_eq!(pods.len(), 2);
    assert_eq!(
        pods[0].metadata.owner_references.as_ref().unwrap()[0].kind,
        "ReplicationController"
    );
}

#[tokio::test]
async fn the_wired_controller_replaces_a_deleted_pod() {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    fake.insert(&replica_set(2));
    let running = tokio::spawn(super::run_replica_sets(ctx.clone()));
    let pods = eventually("two pods", || async {
        let pods = fake.list::<Pod>();
        (pods.len() == 2).then_some(pods)
    })
    .await;
    let api: Api<Pod> = Api::namespaced(fake.client(), "default");
    let first = pods[0].metadata.name.clone().unwrap();
    api.delete(&first, &DeleteParams::default()).await.unwrap();
    eventually("a replacement", || async {
        let pods = fake.list::<Pod>();
        let replaced = pods.len() == 2
            && pods
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(&first));
        replaced.then_some(())
    })
    .await;
    assert_eq!(fake.calls_to(Verb::Create, "pods").len(), 3);
    ctx.stop.cancel();
    running.await.unwrap().unwrap();
}
