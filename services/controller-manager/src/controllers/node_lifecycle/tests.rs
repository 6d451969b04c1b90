use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::{indexes, Informers};
use capstan_client::testing::FakeApi;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::chrono::Utc;
use parking_lot::Mutex;
use serde_json::json;

use super::health::{Graces, Health};
use super::sync::Controller;
use super::taints::{NOT_READY, UNREACHABLE};
use super::zones::{Rates, Zones};
use crate::context::{Context, Reconciler};
use crate::testkit::{context, eventually, object};

const GRACE: Duration = Duration::from_millis(300);

struct Harness {
    _ctx: Arc<Context>,
    informers: Informers,
    controller: Controller,
}

async fn harness(fake: &FakeApi) -> Harness {
    let ctx = context(fake);
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let controller = Controller {
        nodes: nodes.store(),
        pods: pods.store(),
        recorder: ctx.recorder(&client, super::COMPONENT),
        client,
        health: Health::default(),
        zones: Mutex::new(Zones::default()),
        graces: Graces {
            monitor: GRACE,
            startup: GRACE,
        },
        rates: Rates {
            eviction_qps: 0.1,
            secondary_qps: 0.01,
            large_cluster_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        },
        queue: None,
        known: Mutex::new(HashSet::new()),
    };
    Harness {
        informers: ctx.informers.clone(),
        _ctx: ctx,
        controller,
    }
}

impl Harness {
    async fn caught_up(&self, fake: &FakeApi) {
        let versions = |mut list: Vec<String>| {
            list.sort();
            list
        };
        eventually("the caches to catch up", || async {
            let cached = versions(
                self.informers
                    .get::<Node>()
                    .store()
                    .list()
                    .iter()
                    .chain(std::iter::empty())
                    .map(|n| n.metadata.resource_version.clone().unwrap_or_default())
                    .collect(),
            );
            let stored = versions(
                fake.list::<Node>()
                    .iter()
                    .map(|n| n.metadata.resource_version.clone().unwrap_or_default())
                    .collect(),
            );
            let pods = self.informers.get::<Pod>().store().len() == fake.list::<Pod>().len();
            (cached == stored && pods).then_some(())
        })
        .await;
    }
}

fn node(name: &str, ready: &str) -> Node {
    let now = Utc::now().to_rfc3339();
    object(json!({
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "zone-a"}},
        "status": {"conditions": [
            {"type": "Ready", "status": ready, "reason": "KubeletReady",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": now},
        ]},
    }))
}

fn pod_on(name: &str, node: &str) -> Pod {
    object(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }))
}

fn taint_keys(node: &Node, effect: &str) -> Vec<String> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints
        .into_iter()
        .filter(|t| t.effect == effect)
        .map(|t| t.key)
        .collect()
}

fn condition(node: &Node, kind: &str) -> (String, Option<String>) {
    let conditions = node.status.as_ref().unwrap().conditions.as_ref().unwrap();
    let c = conditions.iter().find(|c| c.type_ == kind).unwrap();
    (c.status.clone(), c.reason.clone())
}

#[tokio::test]
async fn a_silent_node_goes_unknown_its_pods_not_ready_and_it_is_tainted() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&node("n1", "True"));
    // A healthy neighbour: with every node down nothing would be tainted.
    fake.insert(&node("n2", "True"));
    fake.insert(&pod_on("web-1", "n1"));
    h.caught_up(&fake).await;
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(
        condition(&stored, "Ready").0,
        "True",
        "alive within its grace period"
    );
    tokio::time::sleep(GRACE + Duration::from_millis(100)).await;
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(
        condition(&stored, "Ready"),
        ("Unknown".into(), Some("NodeStatusUnknown".into()))
    );
    assert_eq!(condition(&stored, "MemoryPressure").0, "Unknown");
    assert_eq!(
        condition(&stored, "DiskPressure").1.as_deref(),
        Some("NodeStatusNeverUpdated")
    );
    assert_eq!(taint_keys(&stored, "NoSchedule"), [UNREACHABLE]);
    let pod: Pod = fake.get(Some("default"), "web-1").unwrap();
    let ready = pod
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    // The NoExecute taint comes through the zone's rate-limited queue.
    h.caught_up(&fake).await;
    h.controller.recount_zones().await;
    h.controller.taint_due().await;
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(taint_keys(&stored, "NoExecute"), [UNREACHABLE]);
    let no_execute = stored
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .find(|t| t.effect == "NoExecute")
        .unwrap();
    assert!(no_execute.time_added.is_some());
    let reasons = eventually("the events", || async {
        let reasons: HashSet<String> = fake
            .list::<Event>()
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        (reasons.contains("NodeNotReady") && reasons.contains("RegisteredNode")).then_some(reasons)
    })
    .await;
    assert!(reasons.contains("NodeNotReady"));

    // The kubelet renews its Lease and posts Ready again: every taint of
    // the controller comes off.
    h.caught_up(&fake).await;
    h.controller
        .health
        .observe_lease("n1", Utc::now(), Utc::now());
    let mut back: Node = fake.get(None, "n1").unwrap();
    back.status = node("n1", "True").status;
    fake.insert(&back);
    h.caught_up(&fake).await;
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert!(
        taint_keys(&stored, "NoExecute").is_empty(),
        "{:?} {:?}",
        stored.spec,
        stored.status
    );
    h.caught_up(&fake).await;
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert!(
        taint_keys(&stored, "NoSchedule").is_empty(),
        "{:?}",
        stored.spec
    );
}

#[tokio::test]
async fn lease_renewals_keep_a_node_ready() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&node("n1", "True"));
    h.caught_up(&fake).await;
    for _ in 0..4 {
        h.controller.sync("n1").await.unwrap();
        tokio::time::sleep(GRACE / 2).await;
        h.controller
            .health
            .observe_lease("n1", Utc::now(), Utc::now());
    }
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(condition(&stored, "Ready").0, "True");
}

#[tokio::test]
async fn a_not_ready_node_swaps_its_unreachable_taint_at_once() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut sick = node("n1", "False");
    sick.spec = Some(object(
        json!({"taints": [{"key": UNREACHABLE, "effect": "NoExecute"}]}),
    ));
    fake.insert(&sick);
    h.caught_up(&fake).await;
    h.controller.sync("n1").await.unwrap();
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(taint_keys(&stored, "NoExecute"), [NOT_READY]);
    assert_eq!(taint_keys(&stored, "NoSchedule"), [NOT_READY]);
}

#[tokio::test]
async fn a_new_node_that_never_reported_is_left_alone_during_its_startup_grace() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&object::<Node>(json!({"metadata": {"name": "fresh"}})));
    h.caught_up(&fake).await;
    h.controller.sync("fresh").await.unwrap();
    let stored: Node = fake.get(None, "fresh").unwrap();
    assert!(stored.status.is_none() || stored.status.unwrap().conditions.is_none());
    assert!(h.controller.zones.lock().due().is_empty());
}

#[tokio::test]
async fn with_every_node_down_nothing_is_tainted() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&node("n1", "True"));
    h.caught_up(&fake).await;
    h.controller.sync("n1").await.unwrap();
    h.controller.recount_zones().await;
    tokio::time::sleep(GRACE + Duration::from_millis(100)).await;
    h.controller.sync("n1").await.unwrap();
    h.caught_up(&fake).await;
    h.controller.recount_zones().await;
    h.controller.taint_due().await;
    let stored: Node = fake.get(None, "n1").unwrap();
    assert_eq!(condition(&stored, "Ready").0, "Unknown");
    assert!(taint_keys(&stored, "NoExecute").is_empty());
}
