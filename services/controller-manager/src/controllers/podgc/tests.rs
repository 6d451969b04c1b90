use std::sync::Arc;
use std::time::Duration;

use capstan_client::testing::FakeApi;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};

use super::sync::{Collector, COUNT_KEY};
use crate::config::Settings;
use crate::context::{Context, Reconciler};
use crate::testkit::{context, eventually, object};

fn pod(name: &str, node: Option<&str>, phase: &str, created: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase},
    })
}

fn names(fake: &FakeApi) -> Vec<String> {
    let mut names: Vec<String> = fake
        .list::<Pod>()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

async fn collector(fake: &FakeApi, ctx: &Arc<Context>, threshold: i64) -> Collector {
    let pods = ctx.informers.get::<Pod>();
    pods.add_index(super::terminated::INDEX, super::terminated::index);
    ctx.informers.get::<Node>();
    ctx.informers.wait_synced().await;
    let count = fake.list::<Pod>().len();
    eventually("the cache", || async {
        (pods.store().len() == count).then_some(())
    })
    .await;
    let quarantine = Duration::from_millis(200);
    collector_on(fake, ctx, threshold, quarantine)
}

fn collector_on(fake: &FakeApi, ctx: &Context, threshold: i64, quarantine: Duration) -> Collector {
    Collector {
        pods: ctx.informers.get::<Pod>().store(),
        nodes: ctx.informers.get::<Node>().store(),
        client: fake.client(),
        threshold,
        quarantine_period: quarantine,
        queue: None,
        quarantine: Default::default(),
    }
}

#[tokio::test]
async fn terminated_pods_past_the_threshold_go_oldest_first() {
    let fake = FakeApi::new();
    fake.insert(&object::<Node>(json!({"metadata": {"name": "n1"}})));
    for (name, phase, day) in [
        ("a", "Succeeded", 1),
        ("b", "Failed", 2),
        ("c", "Succeeded", 3),
        ("d", "Failed", 4),
        ("running", "Running", 0),
    ] {
        let created = format!("2020-01-0{}T00:00:00Z", day + 1);
        fake.insert(&object::<Pod>(pod(name, Some("n1"), phase, &created)));
    }
    let ctx = context(&fake);
    let collector = collector(&fake, &ctx, 2).await;
    collector.sync(COUNT_KEY).await.unwrap();
    assert_eq!(names(&fake), ["c", "d", "running"]);
    let off = collector_on(&fake, &ctx, 0, Duration::ZERO);
    off.sync(COUNT_KEY).await.unwrap();
    assert_eq!(
        names(&fake),
        ["c", "d", "running"],
        "a threshold of 0 is off"
    );
}

#[tokio::test]
async fn an_orphan_waits_out_the_quarantine_then_is_failed_and_deleted() {
    let fake = FakeApi::new();
    let mut orphan = pod("orphan", Some("ghost"), "Running", "2020-01-01T00:00:00Z");
    // A finalizer keeps it after the delete, so its last status can be read.
    orphan["metadata"]["finalizers"] = json!(["test/keep"]);
    fake.insert(&object::<Pod>(orphan));
    let mut unscheduled = pod("unscheduled", None, "Pending", "2020-01-01T00:00:00Z");
    unscheduled["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
    fake.insert(&object::<Pod>(unscheduled));
    fake.insert(&object::<Pod>(pod(
        "pending",
        None,
        "Pending",
        "2020-01-01T00:00:00Z",
    )));
    let ctx = context(&fake);
    let collector = collector(&fake, &ctx, 12500).await;
    for key in ["default/orphan", "default/unscheduled", "default/pending"] {
        collector.sync(key).await.unwrap();
    }
    assert_eq!(
        names(&fake),
        ["orphan", "pending"],
        "the orphan is in quarantine"
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    collector.sync("default/orphan").await.unwrap();
    let left = fake.get::<Pod>(Some("default"), "orphan").unwrap();
    assert!(left.metadata.deletion_timestamp.is_some());
    let status = left.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let mark = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget");
    assert_eq!(
        mark.and_then(|c| c.reason).as_deref(),
        Some("DeletionByPodGC")
    );
}

#[tokio::test]
async fn the_controller_counts_when_pods_end() {
    let fake = FakeApi::new();
    let mut ctx = (*context(&fake)).clone();
    ctx.settings = Arc::new(Settings {
        terminated_pod_gc_threshold: 1,
        ..(*ctx.settings).clone()
    });
    let ctx = Arc::new(ctx);
    let running = tokio::spawn(super::run(ctx.clone()));
    fake.insert(&object::<Node>(json!({"metadata": {"name": "n1"}})));
    fake.insert(&object::<Pod>(pod(
        "old",
        Some("n1"),
        "Succeeded",
        "2020-01-01T00:00:00Z",
    )));
    fake.insert(&object::<Pod>(pod(
        "new",
        Some("n1"),
        "Failed",
        "2020-01-02T00:00:00Z",
    )));
    eventually("the older pod to go", || async {
        (names(&fake) == ["new"]).then_some(())
    })
    .await;
    ctx.stop.cancel();
    running.await.unwrap().unwrap();
}
