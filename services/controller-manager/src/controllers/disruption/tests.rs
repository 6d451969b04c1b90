use std::sync::Arc;

use capstan_client::informer::Informers;
use capstan_client::queue::WorkQueue;
use capstan_client::testing::FakeApi;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::chrono::{Duration, Utc};
use serde_json::json;

use super::expected::Finders;
use super::status::{INSUFFICIENT_PODS, SUFFICIENT_PODS, SYNC_FAILED};
use super::sync::Syncer;
use crate::context::{Context, Reconciler};
use crate::ownership::controller_ref;
use crate::scale::Scales;
use crate::testkit::{context, eventually, object};

struct Harness {
    _ctx: Arc<Context>,
    informers: Informers,
    syncer: Syncer,
}

async fn harness(fake: &FakeApi) -> Harness {
    let ctx = context(fake);
    let i = &ctx.informers;
    let client = fake.client();
    let syncer = Syncer {
        budgets: i.get::<PodDisruptionBudget>().store(),
        pods: i.get::<Pod>().store(),
        finders: Finders {
            replica_sets: i.get::<ReplicaSet>().store(),
            deployments: i.get::<Deployment>().store(),
            controllers: i.get::<ReplicationController>().store(),
            stateful_sets: i.get::<StatefulSet>().store(),
            scales: Scales::default(),
            client: client.clone(),
        },
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
        queue: Some(WorkQueue::new("test")),
    };
    i.wait_synced().await;
    Harness {
        informers: ctx.informers.clone(),
        _ctx: ctx,
        syncer,
    }
}

fn versions<K: kube::Resource>(objects: impl IntoIterator<Item = impl AsRef<K>>) -> Vec<String> {
    let mut list: Vec<String> = objects
        .into_iter()
        .map(|o| {
            o.as_ref()
                .meta()
                .resource_version
                .clone()
                .unwrap_or_default()
        })
        .collect();
    list.sort();
    list
}

impl Harness {
    async fn caught_up(&self, fake: &FakeApi) {
        let i = &self.informers;
        eventually("the caches to catch up", || async {
            let same = versions::<Pod>(i.get::<Pod>().store().list())
                == versions::<Pod>(fake.list::<Pod>().into_iter().map(Box::new))
                && versions::<PodDisruptionBudget>(i.get::<PodDisruptionBudget>().store().list())
                    == versions::<PodDisruptionBudget>(
                        fake.list::<PodDisruptionBudget>().into_iter().map(Box::new),
                    )
                && i.get::<ReplicaSet>().store().len() == fake.list::<ReplicaSet>().len()
                && i.get::<Deployment>().store().len() == fake.list::<Deployment>().len();
            same.then_some(())
        })
        .await;
    }
}

fn budget(spec: serde_json::Value) -> PodDisruptionBudget {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    object(
        json!({"metadata": {"name": "web", "namespace": "default", "generation": 1}, "spec": spec}),
    )
}

fn pod(name: &str, ready: bool, owner: Option<&ReplicaSet>) -> Pod {
    let mut pod: Pod = object(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready",
            "status": if ready {"True"} else {"False"}}]},
    }));
    pod.metadata.owner_references = owner.map(|o| vec![controller_ref(o)]);
    pod
}

fn replica_set(replicas: i32, deployment: Option<&Deployment>) -> ReplicaSet {
    let mut rs: ReplicaSet = object(json!({
        "metadata": {"name": "web-abc", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}},
    }));
    rs.metadata.owner_references = deployment.map(|d| vec![controller_ref(d)]);
    rs
}

fn stored(fake: &FakeApi) -> k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus {
    let pdb: PodDisruptionBudget = fake.get(Some("default"), "web").unwrap();
    pdb.status.unwrap()
}

fn condition(status: &k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus) -> (String, String) {
    let c = &status.conditions.as_ref().unwrap()[0];
    (c.status.clone(), c.reason.clone())
}

#[tokio::test]
async fn an_integer_min_available_counts_the_pods_there_are() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let rs = fake.insert(&replica_set(3, None));
    fake.insert(&budget(json!({"minAvailable": 2})));
    for (name, ready) in [("a", true), ("b", true), ("c", true)] {
        fake.insert(&pod(name, ready, Some(&rs)));
    }
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = stored(&fake);
    assert_eq!(
        (
            status.expected_pods,
            status.desired_healthy,
            status.current_healthy
        ),
        (3, 2, 3)
    );
    assert_eq!(status.disruptions_allowed, 1);
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(condition(&status), ("True".into(), SUFFICIENT_PODS.into()));
    fake.insert(&pod("c", false, Some(&rs)));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = stored(&fake);
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(
        condition(&status),
        ("False".into(), INSUFFICIENT_PODS.into())
    );
}

#[tokio::test]
async fn a_percentage_of_max_unavailable_is_taken_of_the_deployments_scale() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let deployment: Deployment = fake.insert(&object(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}}},
    })));
    let rs = fake.insert(&replica_set(4, Some(&deployment)));
    fake.insert(&budget(json!({"maxUnavailable": "25%"})));
    for name in ["a", "b", "c", "d"] {
        fake.insert(&pod(name, true, Some(&rs)));
    }
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = stored(&fake);
    assert_eq!((status.expected_pods, status.desired_healthy), (4, 3));
    assert_eq!(status.disruptions_allowed, 1);
}

#[tokio::test]
async fn a_controller_found_through_its_scale_subresource() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    // A pod controlled by a kind the controller has no cache for.
    let deployment: Deployment = fake.insert(&object(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}}},
    })));
    let mut lone = pod("a", true, None);
    lone.metadata.owner_references = Some(vec![controller_ref(&deployment)]);
    fake.insert(&lone);
    fake.insert(&budget(json!({"minAvailable": "50%"})));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = stored(&fake);
    assert_eq!((status.expected_pods, status.desired_healthy), (5, 3));
}

#[tokio::test]
async fn a_failed_sync_allows_no_disruption_and_says_why() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let gone = replica_set(3, None);
    fake.insert(&budget(json!({"minAvailable": "50%"})));
    let mut status_seed = budget(json!({"minAvailable": "50%"}));
    status_seed.status = Some(object(json!({"currentHealthy": 3, "desiredHealthy": 1,
        "expectedPods": 3, "disruptionsAllowed": 2})));
    fake.insert(&status_seed);
    // Its ReplicaSet is not there: its scale cannot be known.
    let mut orphaned = pod("a", true, None);
    let mut reference = controller_ref(&gone);
    reference.uid = "missing".into();
    orphaned.metadata.owner_references = Some(vec![reference]);
    fake.insert(&orphaned);
    h.caught_up(&fake).await;
    let err = h.syncer.sync("default/web").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("found no controllers for pod \"a\""),
        "{err}"
    );
    let status = stored(&fake);
    assert_eq!(status.disruptions_allowed, 0);
    assert_eq!(condition(&status), ("False".into(), SYNC_FAILED.into()));
    let events = eventually("the event", || async {
        let events = fake.list::<Event>();
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("CalculateExpectedPodCountFailed"))
            .then_some(events)
    })
    .await;
    assert!(!events.is_empty());
}

#[tokio::test]
async fn pods_the_eviction_api_let_go_are_not_healthy() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let rs = fake.insert(&replica_set(3, None));
    let mut pdb = budget(json!({"minAvailable": 1}));
    let recent = (Utc::now() - Duration::seconds(10)).to_rfc3339();
    pdb.status = Some(object(
        json!({"currentHealthy": 3, "desiredHealthy": 1, "expectedPods": 3,
        "disruptionsAllowed": 1, "disruptedPods": {"a": recent}}),
    ));
    fake.insert(&pdb);
    for name in ["a", "b", "c"] {
        fake.insert(&pod(name, true, Some(&rs)));
    }
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = stored(&fake);
    assert_eq!(status.current_healthy, 2);
    assert_eq!(status.disruptions_allowed, 1);
    assert!(status.disrupted_pods.unwrap().contains_key("a"));
    // A pod with no controller under a percentage budget is reported.
    fake.insert(&pod("stray", true, None));
    h.caught_up(&fake).await;
    let mut percent = budget(json!({"maxUnavailable": 1}));
    percent.metadata.name = Some("web".into());
    fake.insert(&percent);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    eventually("the UnmanagedPods event", || async {
        fake.list::<Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("UnmanagedPods"))
    })
    .await;
}

#[tokio::test]
async fn a_stale_disruption_mark_is_withdrawn() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut marked = pod("a", true, None);
    let long_ago = (Utc::now() - Duration::minutes(3)).to_rfc3339();
    marked
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(object(json!({
        "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
        "lastTransitionTime": long_ago})));
    fake.insert(&marked);
    h.caught_up(&fake).await;
    let queue = WorkQueue::new("stale");
    super::stale::sync(&h.syncer.pods, &h.syncer.client, &queue, "default/a")
        .await
        .unwrap();
    let pod: Pod = fake.get(Some("default"), "a").unwrap();
    let conditions = pod.status.unwrap().conditions.unwrap();
    let mark = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(mark.status, "False");
    assert!(conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True"));
}
