use std::sync::Arc;

use capstan_client::informer::Informer;
use capstan_client::testing::{FakeApi, Verb};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::control::SetControl;
use super::identity::revision_of;
use super::plan::{plan, Action, Policy, Template};
use super::sync::Syncer;
use crate::context::Reconciler;
use crate::expectations::Expectations;
use crate::history::{History, CONTROLLER_REVISION_HASH};
use crate::testkit::{context, eventually, object};

fn stateful_set(replicas: i32, extra: serde_json::Value) -> StatefulSet {
    let mut value = json!({
        "metadata": {"name": "web", "namespace": "default", "generation": 1},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]},
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        },
    });
    json_patch_merge(&mut value["spec"], extra);
    object(value)
}

fn json_patch_merge(target: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(target), Some(extra)) = (target.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
}

struct Harness {
    /// Held: the informers stop with it.
    _ctx: Arc<crate::context::Context>,
    fake: FakeApi,
    sets: Informer<StatefulSet>,
    pods: Informer<Pod>,
    revisions: Informer<ControllerRevision>,
    claims: Informer<PersistentVolumeClaim>,
    syncer: Syncer,
}

async fn harness() -> Harness {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let sets = ctx.informers.get::<StatefulSet>();
    let pods = crate::controllers::replicaset::index_pods(&ctx);
    let revisions = ctx.informers.get::<ControllerRevision>();
    History::index(&revisions);
    let claims = ctx.informers.get::<PersistentVolumeClaim>();
    let expectations = Expectations::new();
    let events = crate::pod_events::PodEvents {
        owners: sets.store(),
        selector: |set: &StatefulSet| super::sync::selector_of(set).ok(),
        expectations: expectations.clone(),
        queue: capstan_client::queue::WorkQueue::new("statefulset-test"),
    };
    pods.add_handler(move |event| events.handle(event));
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        sets: sets.store(),
        pods: pods.store(),
        history: History {
            revisions: revisions.store(),
            client: client.clone(),
        },
        expectations,
        control: SetControl {
            client: client.clone(),
            recorder: ctx.recorder(&client, super::ACCOUNT),
            claims: claims.store(),
        },
        queue: None,
    };
    Harness {
        _ctx: ctx,
        fake,
        sets,
        pods,
        revisions,
        claims,
        syncer,
    }
}

impl Harness {
    /// Waits until the caches show what the API holds, then syncs.
    async fn sync(&self) {
        self.caught_up().await;
        self.syncer.sync("default/web").await.unwrap();
    }

    /// Waits until the caches show what the API holds.
    async fn caught_up(&self) {
        eventually("the caches to catch up", || async {
            let caught_up = self.sets.store().len() == self.fake.list::<StatefulSet>().len()
                && self.pods.store().len() == self.fake.list::<Pod>().len()
                && self.revisions.store().len() == self.fake.list::<ControllerRevision>().len()
                && self.claims.store().len() == self.fake.list::<PersistentVolumeClaim>().len()
                && self.sets.store().list().iter().all(|s| {
                    self.fake
                        .get::<StatefulSet>(Some("default"), "web")
                        .map(|f| f.metadata.resource_version)
                        == Some(s.metadata.resource_version.clone())
                })
                && self.pods.store().list().iter().all(|p| {
                    let name = p.metadata.name.as_deref().unwrap();
                    self.fake
                        .get::<Pod>(Some("default"), name)
                        .map(|f| f.metadata.resource_version)
                        == Some(p.metadata.resource_version.clone())
                });
            caught_up.then_some(())
        })
        .await;
    }

    fn pod_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .fake
            .list::<Pod>()
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Marks the pod Running and Ready, as a kubelet would.
    async fn make_ready(&self, name: &str) {
        let api: Api<Pod> = Api::namespaced(self.fake.client(), "default");
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": Utc::now().to_rfc3339()}]}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    fn status(&self) -> serde_json::Value {
        let set = self
            .fake
            .get::<StatefulSet>(Some("default"), "web")
            .unwrap();
        serde_json::to_value(set.status).unwrap()
    }
}

#[tokio::test]
async fn ordered_ready_creates_one_pod_at_a_time_with_identity_and_claims() {
    let h = harness().await;
    let claim_template = json!({"volumeClaimTemplates": [{"metadata": {"name": "www"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]});
    h.fake.insert(&stateful_set(3, claim_template));
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-0"]);
    h.sync().await;
    assert_eq!(
        h.pod_names(),
        ["web-0"],
        "web-1 waits for web-0 to be Ready"
    );
    let pod = h.fake.get::<Pod>(Some("default"), "web-0").unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let volume = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-0"
    );
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-0");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "0");
    assert!(labels[CONTROLLER_REVISION_HASH].starts_with("web-"));
    let claim = h
        .fake
        .get::<PersistentVolumeClaim>(Some("default"), "www-web-0")
        .unwrap();
    assert_eq!(claim.metadata.labels.unwrap()["app"], "web");
    h.make_ready("web-0").await;
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-0", "web-1"]);
    h.make_ready("web-1").await;
    h.sync().await;
    h.make_ready("web-2").await;
    h.sync().await;
    let status = h.status();
    assert_eq!(status["replicas"], 3);
    assert_eq!(status["readyReplicas"], 3);
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(h.fake.list::<ControllerRevision>().len(), 1);
    let events = h.fake.list::<Event>();
    assert!(events
        .iter()
        .any(|e| e.reason.as_deref() == Some("SuccessfulCreate")
            && e.message.as_deref() == Some("create Pod web-0 in StatefulSet web successful")));
}

#[tokio::test]
async fn a_lagging_cache_never_creates_a_pod_twice() {
    let h = harness().await;
    h.fake
        .insert(&stateful_set(2, json!({"podManagementPolicy": "Parallel"})));
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-0", "web-1"]);
    // Synced again before the watch shows the pods: expectations hold it.
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(h.fake.calls_to(Verb::Create, "pods").len(), 2);
}

#[tokio::test]
async fn scale_down_removes_the_highest_ordinal_first_and_a_new_image_rolls_from_the_top() {
    let h = harness().await;
    h.fake
        .insert(&stateful_set(3, json!({"podManagementPolicy": "Parallel"})));
    h.sync().await;
    for name in ["web-0", "web-1", "web-2"] {
        h.make_ready(name).await;
    }
    h.sync().await;
    let sets: Api<StatefulSet> = Api::namespaced(h.fake.client(), "default");
    let patch = json!({"spec": {"replicas": 2, "podManagementPolicy": "OrderedReady"}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-0", "web-1"]);
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&image))
        .await
        .unwrap();
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-0"], "web-1 is replaced first");
    h.sync().await;
    let web1 = h.fake.get::<Pod>(Some("default"), "web-1").unwrap();
    let update = h.status()["updateRevision"].as_str().unwrap().to_string();
    assert_eq!(revision_of(&web1), update);
    assert_ne!(h.status()["currentRevision"], h.status()["updateRevision"]);
    h.make_ready("web-1").await;
    h.sync().await;
    assert_eq!(h.pod_names(), ["web-1"], "then web-0");
    h.sync().await;
    h.make_ready("web-0").await;
    h.sync().await;
    let status = h.status();
    assert_eq!(status["currentRevision"], update.as_str());
    assert_eq!(status["updatedReplicas"], 2);
    assert_eq!(h.fake.list::<ControllerRevision>().len(), 2);
}

#[tokio::test]
async fn a_revisions_cache_behind_the_api_gives_a_new_template_the_next_number() {
    let h = harness().await;
    h.fake.insert(&stateful_set(0, json!({})));
    h.sync().await;
    // A syncer whose revisions cache never saw the first revision.
    let elsewhere = FakeApi::new();
    let other = context(&elsewhere);
    let empty = other.informers.get::<ControllerRevision>();
    History::index(&empty);
    other.informers.wait_synced().await;
    let lagging = Syncer {
        sets: h.syncer.sets.clone(),
        pods: h.syncer.pods.clone(),
        history: History {
            revisions: empty.store(),
            client: h.fake.client(),
        },
        expectations: Expectations::new(),
        control: h.syncer.control.clone(),
        queue: None,
    };
    let sets: Api<StatefulSet> = Api::namespaced(h.fake.client(), "default");
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&image))
        .await
        .unwrap();
    h.caught_up().await;
    lagging.sync("default/web").await.unwrap();
    let mut numbers: Vec<i64> = h
        .fake
        .list::<ControllerRevision>()
        .iter()
        .map(|r| r.revision)
        .collect();
    numbers.sort();
    assert_eq!(numbers, [1, 2]);
}

#[tokio::test]
async fn undo_reuses_the_old_revision_under_a_new_number() {
    let h = harness().await;
    h.fake.insert(&stateful_set(0, json!({})));
    h.sync().await;
    let sets: Api<StatefulSet> = Api::namespaced(h.fake.client(), "default");
    let image = |tag: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": format!("nginx:{tag}")}]}}}});
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&image("2")))
        .await
        .unwrap();
    h.sync().await;
    sets.patch("web", &PatchParams::default(), &Patch::Merge(&image("1")))
        .await
        .unwrap();
    h.sync().await;
    let mut revisions = h.fake.list::<ControllerRevision>();
    revisions.sort_by_key(|r| r.revision);
    assert_eq!(revisions.len(), 2);
    assert_eq!(
        revisions.iter().map(|r| r.revision).collect::<Vec<_>>(),
        [2, 3]
    );
    let newest = crate::history::template_of(&revisions[1]).unwrap();
    assert_eq!(
        newest.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:1")
    );
    assert_eq!(
        h.status()["updateRevision"],
        revisions[1].metadata.name.clone().unwrap()
    );
}

fn pod_at(ordinal: i32, revision: &str, ready: bool) -> (i32, Arc<Pod>) {
    let mut value = json!({
        "metadata": {"name": format!("web-{ordinal}"), "namespace": "default",
            "uid": format!("u{ordinal}"), "labels": {CONTROLLER_REVISION_HASH: revision}},
        "status": {"phase": "Running"},
    });
    if ready {
        value["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    }
    (ordinal, Arc::new(object(value)))
}

fn policy(replicas: i32, rolling: Option<(i32, i32)>) -> Policy {
    Policy {
        start_ordinal: 0,
        replicas,
        parallel: false,
        rolling,
        min_ready_seconds: 0,
        update_revision: "new".into(),
    }
}

fn deleted(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete(p) | Action::Condemn(p) => p.metadata.name.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn the_partition_keeps_low_ordinals_and_max_unavailable_bounds_the_roll() {
    let now = Utc::now();
    let old: Vec<_> = (0..4).map(|o| pod_at(o, "old", true)).collect();
    let actions = plan(&policy(4, Some((2, 1))), &old, now);
    assert_eq!(deleted(&actions), ["web-3"]);
    let actions = plan(&policy(4, Some((2, 2))), &old, now);
    assert_eq!(deleted(&actions), ["web-3", "web-2"]);
    let actions = plan(&policy(4, Some((0, 3))), &old, now);
    assert_eq!(deleted(&actions), ["web-3", "web-2", "web-1"]);
    // OnDelete: nothing is replaced.
    assert!(plan(&policy(4, None), &old, now).is_empty());
    // A missing pod below the partition is made from the current revision.
    let gap = vec![old[1].clone(), old[2].clone(), old[3].clone()];
    let actions = plan(&policy(4, Some((2, 1))), &gap, now);
    assert_eq!(
        actions,
        [Action::Create {
            ordinal: 0,
            template: Template::Current
        }]
    );
    // An updated pod not yet Ready holds the roll.
    let mut waiting = old.clone();
    waiting[3] = pod_at(3, "new", false);
    let mut parallel = policy(4, Some((0, 1)));
    parallel.parallel = true;
    assert!(deleted(&plan(&parallel, &waiting, now)).is_empty());
}

#[test]
fn ordered_ready_waits_and_condemns_from_the_top() {
    let now = Utc::now();
    let pods = vec![
        pod_at(0, "new", true),
        pod_at(1, "new", false),
        pod_at(2, "new", true),
        pod_at(3, "new", true),
    ];
    // web-1 not Ready: nothing is created or deleted past it.
    assert!(plan(&policy(4, Some((0, 1))), &pods, now).is_empty());
    let ready: Vec<_> = (0..4).map(|o| pod_at(o, "new", true)).collect();
    assert_eq!(
        deleted(&plan(&policy(2, Some((0, 1))), &ready, now)),
        ["web-3"]
    );
    let mut parallel = policy(2, Some((0, 1)));
    parallel.parallel = true;
    assert_eq!(deleted(&plan(&parallel, &ready, now)), ["web-3", "web-2"]);
}
