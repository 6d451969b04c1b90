use capstan_client::informer::InformerOptions;
use capstan_client::testing::{FakeApi, Verb};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ApiResource;
use kube::Resource;
use serde_json::json;

use super::collect::Collector;
use super::graph::{self, Graph, Type, BY_OWNER, BY_UID};
use crate::context::Reconciler;
use crate::testkit::{context, eventually, object};

fn resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

async fn collector(fake: &FakeApi) -> (Collector, std::sync::Arc<crate::context::Context>) {
    let ctx = context(fake);
    let graph = Graph::default();
    for (resource, namespaced) in [(resource::<ReplicaSet>(), true), (resource::<Pod>(), true)] {
        let informer = ctx
            .informers
            .get_dynamic(&resource, None, InformerOptions::default());
        informer.add_index(BY_UID, graph::uid_index);
        informer.add_index(BY_OWNER, graph::owner_index);
        informer.wait_synced().await;
        graph.add(Type {
            resource,
            namespaced,
            store: informer.store(),
        });
    }
    let collector = Collector {
        graph,
        client: fake.client(),
        queue: None,
    };
    (collector, ctx)
}

fn owner(name: &str, extra: serde_json::Value) -> ReplicaSet {
    let mut value = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"selector": {"matchLabels": {"a": "b"}}}});
    if let Some(metadata) = extra.as_object() {
        for (k, v) in metadata {
            value["metadata"][k] = v.clone();
        }
    }
    object(value)
}

fn pod(name: &str, owners: &[&str], block: bool) -> Pod {
    let references: Vec<_> = owners
        .iter()
        .map(|o| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o,
            "uid": format!("uid-{o}"), "controller": false, "blockOwnerDeletion": block})
        })
        .collect();
    object(
        json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
        "ownerReferences": references}, "spec": {"containers": []}}),
    )
}

async fn cached(collector: &Collector, uid: &str) {
    eventually("the object in the caches", || async {
        collector.graph.by_uid(uid).map(|_| ())
    })
    .await;
}

#[tokio::test]
async fn a_dependent_whose_owner_is_gone_is_deleted() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    fake.insert(&pod("orphaned", &["gone"], false));
    cached(&collector, "uid-orphaned").await;
    collector.sync("uid-orphaned").await.unwrap();
    assert!(fake.get::<Pod>(Some("default"), "orphaned").is_none());
    let deletes = fake.calls_to(Verb::Delete, "pods");
    assert_eq!(deletes.len(), 1);
}

#[tokio::test]
async fn a_dependent_keeps_its_live_owner_and_drops_the_gone_one() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    fake.insert(&owner("alive", json!({})));
    fake.insert(&pod("shared", &["alive", "gone"], false));
    cached(&collector, "uid-alive").await;
    cached(&collector, "uid-shared").await;
    collector.sync("uid-shared").await.unwrap();
    let stored: Pod = fake.get(Some("default"), "shared").unwrap();
    let references = stored.metadata.owner_references.unwrap();
    assert_eq!(references.len(), 1);
    assert_eq!(references[0].name, "alive");
}

#[tokio::test]
async fn an_owner_that_is_not_yet_cached_is_looked_up_before_anything_is_deleted() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    fake.set_watch_delay("replicasets", std::time::Duration::from_secs(30));
    fake.insert(&pod("young", &["late"], false));
    cached(&collector, "uid-young").await;
    // The owner exists in the API; its watch is far behind.
    fake.insert(&owner("late", json!({})));
    collector.sync("uid-young").await.unwrap();
    assert!(fake.get::<Pod>(Some("default"), "young").is_some());
}

#[tokio::test]
async fn an_orphaning_owner_lets_go_of_its_dependents_then_of_the_finalizer() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    let now = k8s_openapi::chrono::Utc::now().to_rfc3339();
    fake.insert(&owner(
        "leaving",
        json!({"finalizers": ["orphan"], "deletionTimestamp": now}),
    ));
    fake.insert(&pod("kept", &["leaving"], true));
    cached(&collector, "uid-leaving").await;
    cached(&collector, "uid-kept").await;
    collector.sync("uid-leaving").await.unwrap();
    let kept: Pod = fake.get(Some("default"), "kept").unwrap();
    assert!(kept
        .metadata
        .owner_references
        .unwrap_or_default()
        .is_empty());
    eventually("the dependent let go in the cache", || async {
        collector
            .graph
            .dependents("uid-leaving")
            .is_empty()
            .then_some(())
    })
    .await;
    collector.sync("uid-leaving").await.unwrap();
    // The finalizer went, so the API server removed the owner.
    let left: Option<ReplicaSet> = fake.get(Some("default"), "leaving");
    assert!(left.is_none_or(|rs| rs.metadata.finalizers.unwrap_or_default().is_empty()));
}

#[tokio::test]
async fn a_foreground_owner_waits_for_blocking_dependents() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    let now = k8s_openapi::chrono::Utc::now().to_rfc3339();
    fake.insert(&owner(
        "parent",
        json!({"finalizers": ["foregroundDeletion"], "deletionTimestamp": now}),
    ));
    fake.insert(&pod("child", &["parent"], true));
    cached(&collector, "uid-parent").await;
    cached(&collector, "uid-child").await;
    collector.sync("uid-parent").await.unwrap();
    assert!(fake.get::<ReplicaSet>(Some("default"), "parent").is_some());
    // The child sees its owner waiting and goes.
    collector.sync("uid-child").await.unwrap();
    assert!(fake.get::<Pod>(Some("default"), "child").is_none());
    eventually("the child gone from the cache", || async {
        collector
            .graph
            .dependents("uid-parent")
            .is_empty()
            .then_some(())
    })
    .await;
    collector.sync("uid-parent").await.unwrap();
    let left: Option<ReplicaSet> = fake.get(Some("default"), "parent");
    assert!(left.is_none_or(|rs| rs.metadata.finalizers.unwrap_or_default().is_empty()));
}

#[tokio::test]
async fn an_owner_of_a_type_not_yet_watched_is_retried_and_keeps_its_dependent() {
    let fake = FakeApi::new();
    let (collector, _ctx) = collector(&fake).await;
    let dependent: Pod = object(json!({"metadata": {"name": "early", "namespace": "default",
        "uid": "uid-early", "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
        "name": "w", "uid": "uid-w"}]}, "spec": {"containers": []}}));
    fake.insert(&dependent);
    cached(&collector, "uid-early").await;
    // An error puts the object back in the queue with backoff, to be
    // judged once discovery has brought the owner's type.
    let err = collector.sync("uid-early").await.unwrap_err();
    assert!(
        err.to_string().contains("example.com/v1, Kind=Widget"),
        "{err}"
    );
    assert!(fake.get::<Pod>(Some("default"), "early").is_some());
    assert!(fake.calls_to(Verb::Delete, "pods").is_empty());
}
