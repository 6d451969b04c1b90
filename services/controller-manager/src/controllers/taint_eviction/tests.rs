use std::collections::HashMap;

use capstan_client::testing::FakeApi;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::chrono::{Duration, Utc};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::sync::{Evictor, REASON};
use crate::context::Reconciler;
use crate::testkit::{context, eventually, object};

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

fn node(name: &str, tainted_ago: Option<i64>) -> Node {
    let taints = tainted_ago.map(|ago| {
        let added = (Utc::now() - Duration::seconds(ago)).to_rfc3339();
        json!([{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": added},
               {"key": UNREACHABLE, "effect": "NoSchedule"}])
    });
    object(json!({"metadata": {"name": name}, "spec": {"taints": taints}}))
}

fn pod(name: &str, node: &str, tolerations: Value) -> Pod {
    object(json!({
        "metadata": {"name": name, "namespace": "default",
            "creationTimestamp": "2020-01-01T00:00:00Z"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}],
            "tolerations": tolerations},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }))
}

fn tolerating(seconds: Option<i64>) -> Value {
    json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
        "tolerationSeconds": seconds}])
}

fn going(fake: &FakeApi) -> Vec<String> {
    let mut names: Vec<String> = fake
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

fn disruption_target(fake: &FakeApi, name: &str) -> Option<(String, String)> {
    let pod = fake.get::<Pod>(Some("default"), name)?;
    let conditions = pod.status?.conditions?;
    let mark = conditions
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")?;
    Some((mark.status, mark.reason.unwrap_or_default()))
}

#[tokio::test]
async fn intolerant_and_expired_pods_go_the_others_wait_or_stay() {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let nodes = ctx.informers.get::<Node>();
    let pods = ctx.informers.get::<Pod>();
    ctx.informers.wait_synced().await;
    fake.insert(&node("n1", Some(10)));
    fake.insert(&node("n2", None));
    fake.insert(&pod("intolerant", "n1", json!([])));
    fake.insert(&pod("expired", "n1", tolerating(Some(5))));
    fake.insert(&pod("waiting", "n1", tolerating(Some(300))));
    fake.insert(&pod("forever", "n1", tolerating(None)));
    fake.insert(&pod("elsewhere", "n2", json!([])));
    eventually("the cache", || async {
        (pods.store().len() == 5 && nodes.store().len() == 2).then_some(())
    })
    .await;
    let client = fake.client();
    let evictor = Evictor {
        pods: pods.store(),
        nodes: nodes.store(),
        recorder: ctx.recorder(&client, super::COMPONENT),
        client,
        queue: None,
        scheduled: Mutex::new(HashMap::new()),
    };
    for name in ["intolerant", "expired", "waiting", "forever", "elsewhere"] {
        evictor.sync(&format!("default/{name}")).await.unwrap();
    }
    assert_eq!(going(&fake), ["expired", "intolerant"]);
    let marked = Some(("True".to_string(), "DeletionByTaintManager".to_string()));
    assert_eq!(disruption_target(&fake, "intolerant"), marked);
    assert_eq!(disruption_target(&fake, "waiting"), None);
    let deadline = evictor.scheduled.lock().get("default/waiting").copied();
    let left = deadline.expect("a deadline") - Utc::now();
    assert!((285..=290).contains(&left.num_seconds()), "{left}");

    // The node comes back before the deadline: the deletion is cancelled.
    fake.insert(&node("n1", None));
    eventually("the untainted node", || async {
        let n1 = nodes.store().get(None, "n1")?;
        n1.spec.as_ref()?.taints.is_none().then_some(())
    })
    .await;
    evictor.sync("default/waiting").await.unwrap();
    assert!(evictor.scheduled.lock().is_empty());
    assert_eq!(going(&fake), ["expired", "intolerant"]);
    let messages: Vec<String> = eventually("the events", || async {
        let events: Vec<String> = fake
            .list::<Event>()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(REASON))
            .filter_map(|e| e.message)
            .collect();
        (events.len() == 3).then_some(events)
    })
    .await;
    assert!(messages.contains(&"Marking for deletion Pod default/intolerant".to_string()));
    assert!(messages.contains(&"Cancelling deletion of Pod default/waiting".to_string()));
}

#[tokio::test]
async fn a_toleration_running_out_evicts_without_any_other_change() {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let running = tokio::spawn(super::run(ctx.clone()));
    fake.insert(&node("n1", None));
    fake.insert(&pod("short", "n1", tolerating(Some(1))));
    fake.insert(&pod("long", "n1", tolerating(Some(3600))));
    // The taint comes after the pods: its node's change queues them.
    fake.insert(&node("n1", Some(0)));
    eventually("the short toleration to run out", || async {
        (going(&fake) == ["short"]).then_some(())
    })
    .await;
    // A pod bound to the tainted node later, tolerating nothing, goes at once.
    fake.insert(&pod("late", "n1", json!([])));
    eventually("the intolerant newcomer to go", || async {
        (going(&fake) == ["late", "short"]).then_some(())
    })
    .await;
    ctx.stop.cancel();
    running.await.unwrap().unwrap();
}
