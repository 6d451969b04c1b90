use std::sync::Arc;

use capstan_client::informer::Informer;
use capstan_client::testing::{FakeApi, Verb};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};
use serde_json::{json, Value};

use super::sync::Syncer;
use super::util::{self, POD_TEMPLATE_HASH, REVISION};
use crate::context::{Context, Reconciler};
use crate::ownership::{controller_ref, BY_CONTROLLER, ORPHANS};
use crate::testkit::{context, eventually, object};

fn deployment(replicas: i32, image: &str, strategy: Value) -> Deployment {
    object(json!({
        "metadata": {"name": "web", "namespace": "default", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]},
            },
        },
    }))
}

fn rolling() -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
}

/// A ReplicaSet of `d` for `image` as the controller would have made it,
/// with `available` of its `replicas` pods available.
fn replica_set(
    d: &Deployment,
    image: &str,
    revision: i64,
    replicas: i32,
    available: i32,
) -> ReplicaSet {
    let mut template = d.spec.as_ref().unwrap().template.clone();
    template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
    let hash = util::pod_template_hash(&template, None);
    template.metadata.as_mut().unwrap().labels = Some(util::with_hash_label(
        template.metadata.as_ref().unwrap().labels.as_ref(),
        &hash,
    ));
    let mut rs: ReplicaSet = object(json!({
        "metadata": {"name": format!("web-{hash}"), "namespace": "default", "generation": 1,
            "labels": {"app": "web", POD_TEMPLATE_HASH: hash},
            "annotations": {REVISION: revision.to_string(),
                util::DESIRED_REPLICAS: util::replicas(d).to_string(),
                util::MAX_REPLICAS: (util::replicas(d) + util::max_surge(d)).to_string()}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web", POD_TEMPLATE_HASH: hash}}},
        "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available,
            "observedGeneration": 1},
    }));
    rs.spec.as_mut().unwrap().template = Some(template);
    rs.metadata.owner_references = Some(vec![controller_ref(d)]);
    rs
}

struct Harness {
    _ctx: Arc<Context>,
    deployments: Informer<Deployment>,
    replica_sets: Informer<ReplicaSet>,
    syncer: Syncer,
}

async fn harness(fake: &FakeApi) -> Harness {
    let ctx = context(fake);
    let deployments = ctx.informers.get::<Deployment>();
    let replica_sets = ctx.informers.get::<ReplicaSet>();
    replica_sets.add_index(
        BY_CONTROLLER,
        crate::ownership::by_controller_uid::<ReplicaSet>,
    );
    replica_sets.add_index(
        ORPHANS,
        crate::ownership::orphans_by_namespace::<ReplicaSet>,
    );
    let pods = crate::controllers::replicaset::index_pods(&ctx);
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        deployments: deployments.store(),
        replica_sets: replica_sets.store(),
        pods: pods.store(),
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
        queue: None,
    };
    Harness {
        _ctx: ctx,
        deployments,
        replica_sets,
        syncer,
    }
}

impl Harness {
    /// Waits until both caches hold exactly what the API holds.
    async fn caught_up(&self, fake: &FakeApi) {
        eventually("the caches to catch up", || async {
            let same = |stored: Vec<(String, Option<String>)>,
                        cached: Vec<(String, Option<String>)>| {
                let mut stored = stored;
                let mut cached = cached;
                stored.sort();
                cached.sort();
                stored == cached
            };
            let rv = |m: &kube::api::ObjectMeta| {
                (
                    m.name.clone().unwrap_or_default(),
                    m.resource_version.clone(),
                )
            };
            let d_ok = same(
                fake.list::<Deployment>()
                    .iter()
                    .map(|d| rv(&d.metadata))
                    .collect(),
                self.deployments
                    .store()
                    .list()
                    .iter()
                    .map(|d| rv(&d.metadata))
                    .collect(),
            );
            let rs_ok = same(
                fake.list::<ReplicaSet>()
                    .iter()
                    .map(|r| rv(&r.metadata))
                    .collect(),
                self.replica_sets
                    .store()
                    .list()
                    .iter()
                    .map(|r| rv(&r.metadata))
                    .collect(),
            );
            (d_ok && rs_ok).then_some(())
        })
        .await;
    }

    fn sets(&self) -> Vec<ReplicaSet> {
        self.replica_sets
            .store()
            .list()
            .iter()
            .map(|rs| rs.as_ref().clone())
            .collect()
    }
}

fn stored_sets(fake: &FakeApi) -> Vec<ReplicaSet> {
    let mut sets = fake.list::<ReplicaSet>();
    sets.sort_by_key(|rs| util::revision(&rs.metadata));
    sets
}

#[tokio::test]
async fn a_new_deployment_gets_a_hashed_replica_set_at_revision_one() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&deployment(3, "nginx:1", rolling()));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let sets = stored_sets(&fake);
    assert_eq!(sets.len(), 1);
    let rs = &sets[0];
    let hash = rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH].clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    assert_eq!(util::rs_replicas(rs), 3);
    assert_eq!(util::annotation(&rs.metadata, REVISION), Some("1"));
    assert_eq!(
        util::annotation(&rs.metadata, util::DESIRED_REPLICAS),
        Some("3")
    );
    assert_eq!(
        util::annotation(&rs.metadata, util::MAX_REPLICAS),
        Some("4")
    );
    let selector = &rs.spec.as_ref().unwrap().selector;
    assert_eq!(
        selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH],
        hash
    );
    let d: Deployment = fake.get(Some("default"), "web").unwrap();
    assert_eq!(util::annotation(&d.metadata, REVISION), Some("1"));
    let event = eventually("ScalingReplicaSet", || async {
        fake.list::<Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ScalingReplicaSet"))
    })
    .await;
    assert_eq!(
        event.message.unwrap(),
        format!("Scaled up replica set web-{hash} from 0 to 3")
    );
}

#[tokio::test]
async fn a_rolling_update_surges_then_scales_old_pods_down_as_new_ones_become_available() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let d = fake.insert(&deployment(4, "nginx:2", rolling()));
    fake.insert(&replica_set(&d, "nginx:1", 1, 4, 4));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let sets = stored_sets(&fake);
    assert_eq!(sets.len(), 2);
    // 25% of 4: one surge pod for the new set; the old one keeps 4 (25% unavailable = 1
    // would allow one down, but the new pod is not available yet: 4+1-3-1 = 1 > 0 ... the
    // old set loses one only once the new one is created and counted).
    let new = &sets[1];
    assert_eq!(util::annotation(&new.metadata, REVISION), Some("2"));
    assert_eq!(util::rs_replicas(new), 1);
    // The new pod becomes available: old pods may go.
    let mut new = new.clone();
    new.status = Some(object(
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1}),
    ));
    fake.insert(&new);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let old_size = util::rs_replicas(&stored_sets(&fake)[0]);
    assert!(old_size < 4, "the old set was not scaled down: {old_size}");
    let total: i32 = stored_sets(&fake).iter().map(util::rs_replicas).sum();
    assert!(total <= 5, "more than replicas + maxSurge: {total}");
}

#[tokio::test]
async fn a_replica_change_scales_the_only_active_set() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let d = fake.insert(&deployment(3, "nginx:1", rolling()));
    fake.insert(&replica_set(&d, "nginx:1", 1, 3, 3));
    h.caught_up(&fake).await;
    let mut scaled = d.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(6);
    fake.insert(&scaled);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let sets = stored_sets(&fake);
    assert_eq!(sets.len(), 1);
    assert_eq!(util::rs_replicas(&sets[0]), 6);
    assert_eq!(
        util::annotation(&sets[0].metadata, util::DESIRED_REPLICAS),
        Some("6")
    );
}

#[tokio::test]
async fn recreate_scales_old_sets_to_zero_before_making_the_new_one() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let d = fake.insert(&deployment(2, "nginx:2", json!({"type": "Recreate"})));
    fake.insert(&replica_set(&d, "nginx:1", 1, 2, 2));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let sets = stored_sets(&fake);
    assert_eq!(sets.len(), 1, "no new set while old pods run");
    assert_eq!(util::rs_replicas(&sets[0]), 0);
    // Its pods are gone: the new set comes.
    let mut old = sets[0].clone();
    old.status = Some(object(json!({"replicas": 0, "observedGeneration": 2})));
    fake.insert(&old);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let sets = stored_sets(&fake);
    assert_eq!(sets.len(), 2);
    assert_eq!(util::rs_replicas(&sets[1]), 2);
}

#[tokio::test]
async fn a_complete_rollout_reports_progress_and_availability() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let d = fake.insert(&deployment(2, "nginx:1", rolling()));
    fake.insert(&replica_set(&d, "nginx:1", 1, 2, 2));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = fake
        .get::<Deployment>(Some("default"), "web")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.replicas, Some(2));
    assert_eq!(status.updated_replicas, Some(2));
    assert_eq!(status.available_replicas, Some(2));
    let reason = |kind: &str| {
        let c = status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == kind)
            .unwrap();
        (c.status.clone(), c.reason.clone().unwrap())
    };
    assert_eq!(
        reason("Available"),
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    assert_eq!(
        reason("Progressing"),
        ("True".into(), "NewReplicaSetAvailable".into())
    );
}

#[tokio::test]
async fn a_stalled_rollout_exceeds_its_progress_deadline() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut d = deployment(2, "nginx:1", rolling());
    let long_ago = (Utc::now() - ChronoDuration::seconds(700)).to_rfc3339();
    d.status = Some(object(
        json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
            "message": "progressing", "lastUpdateTime": long_ago, "lastTransitionTime": long_ago}]}),
    ));
    let d = fake.insert(&d);
    fake.insert(&replica_set(&d, "nginx:1", 1, 2, 0));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let status = fake
        .get::<Deployment>(Some("default"), "web")
        .unwrap()
        .status
        .unwrap();
    let progressing = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(progressing.status, "False");
    assert_eq!(
        progressing.reason.as_deref(),
        Some("ProgressDeadlineExceeded")
    );
}

#[tokio::test]
async fn a_selector_that_selects_everything_is_refused_with_an_event() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut d = deployment(1, "nginx:1", rolling());
    d.spec.as_mut().unwrap().selector = object(json!({}));
    fake.insert(&d);
    h.caught_up(&fake).await;
    assert!(h.syncer.sync("default/web").await.is_err());
    assert!(fake.calls_to(Verb::Create, "replicasets").is_empty());
    eventually("SelectingAll", || async {
        fake.list::<Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SelectingAll"))
    })
    .await;
}

#[tokio::test]
async fn history_past_the_limit_is_deleted_oldest_first() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut d = deployment(1, "nginx:4", rolling());
    d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    let d = fake.insert(&d);
    for (revision, image) in [(1, "nginx:1"), (2, "nginx:2"), (3, "nginx:3")] {
        fake.insert(&replica_set(&d, image, revision, 0, 0));
    }
    fake.insert(&replica_set(&d, "nginx:4", 4, 1, 1));
    h.caught_up(&fake).await;
    assert_eq!(h.sets().len(), 4);
    // The first sync records the rollout complete; history is trimmed
    // once the status says so.
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(stored_sets(&fake).len(), 4);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let left: Vec<i64> = stored_sets(&fake)
        .iter()
        .map(|rs| util::revision(&rs.metadata))
        .collect();
    assert_eq!(left, [3, 4]);
}
