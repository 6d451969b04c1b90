//! Informers against the in-memory API: sharing, handlers, indexes,
//! resuming a dropped watch, relisting after 410.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;

use super::*;
use crate::testing::{FakeApi, Verb};

fn configmap(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                     "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "data": {"k": "v"},
    }))
    .unwrap()
}

/// Records what a handler saw as `ADDED name`, `UPDATED name`, `DELETED name`.
fn recorder<K: Resource + Send + Sync + 'static>(
    informer: &Informer<K>,
) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    informer.add_handler(move |event: &InformerEvent<K>| {
        let what = match event {
            InformerEvent::Added(_) => "ADDED",
            InformerEvent::Updated { .. } => "UPDATED",
            InformerEvent::Deleted(_) => "DELETED",
        };
        sink.lock().push(format!("{what} {}", event.key()));
    });
    seen
}

async fn wait_for(what: &str, check: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test]
async fn one_watch_per_type_shared_by_every_user() {
    let fake = FakeApi::new();
    let informers = Informers::new(fake.client());
    let first = informers.get::<ConfigMap>();
    let second = informers.get::<ConfigMap>();
    informers.wait_synced().await;
    assert!(first.has_synced() && second.has_synced());
    wait_for("the watch to open", || fake.open_watches() == 1).await;
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    api.create(&PostParams::default(), &configmap("a", "web"))
        .await
        .unwrap();
    wait_for("the second handle to see it", || second.store().len() == 1).await;
    assert_eq!(fake.calls_to(Verb::List, "configmaps").len(), 1);
    assert_eq!(fake.calls_to(Verb::Watch, "configmaps").len(), 1);
    // Another selector is another watch with its own cache.
    let selected = informers.get_with::<ConfigMap>(InformerOptions::default().labels("app=db"));
    selected.wait_synced().await;
    assert!(selected.store().is_empty());
    assert_eq!(fake.calls_to(Verb::List, "configmaps").len(), 2);
}

#[tokio::test]
async fn handlers_see_adds_updates_and_deletes_after_the_cache_took_them() {
    let fake = FakeApi::new();
    let informers = Informers::new(fake.client());
    let cms = informers.get::<ConfigMap>();
    cms.wait_synced().await;
    let store = cms.store();
    let seen = recorder(&cms);
    // The handler reads the cache: it must already hold the change.
    let consistent = Arc::new(Mutex::new(true));
    let check = consistent.clone();
    cms.add_handler(move |event: &InformerEvent<ConfigMap>| {
        let cached = store.get_by_key(&event.key());
        let ok = match event {
            InformerEvent::Deleted(_) => cached.is_none(),
            other => cached.is_some_and(|c| Arc::ptr_eq(&c, other.object())),
        };
        *check.lock() &= ok;
    });
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    api.create(&PostParams::default(), &configmap("a", "web"))
        .await
        .unwrap();
    let patch = json!({"data": {"k": "v2"}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    wait_for("three events", || seen.lock().len() == 3).await;
    assert_eq!(
        *seen.lock(),
        ["ADDED default/a", "UPDATED default/a", "DELETED default/a"]
    );
    assert!(
        *consistent.lock(),
        "a handler ran before the cache held the change"
    );
}

#[tokio::test]
async fn a_late_handler_gets_what_is_cached_and_the_cache_is_trimmed() {
    let fake = FakeApi::new();
    fake.insert(&configmap("a", "web"));
    fake.insert(&configmap("b", "web"));
    let informers = Informers::new(fake.client());
    let cms = informers.get::<ConfigMap>();
    cms.wait_synced().await;
    let seen = recorder(&cms);
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(got, ["ADDED default/a", "ADDED default/b"]);
    let cached = cms.store().get(Some("default"), "a").unwrap();
    assert!(
        cached.metadata.managed_fields.is_none(),
        "managedFields are dropped"
    );
}

#[tokio::test]
async fn indexes_answer_by_node_and_owner() {
    let fake = FakeApi::new();
    for (name, node, owner) in [("p1", "n1", "u1"), ("p2", "n1", "u2"), ("p3", "n2", "u1")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner}]},
            "spec": {"nodeName": node, "containers": []},
        }))
        .unwrap();
        fake.insert(&pod);
    }
    let informers = Informers::new(fake.client());
    let pods = informers.get::<Pod>();
    pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
    pods.add_index(indexes::BY_OWNER_UID, indexes::owner_uids::<Pod>);
    pods.wait_synced().await;
    let store = pods.store();
    let mut on_n1 = store.keys_by_index(indexes::BY_NODE_NAME, "n1");
    on_n1.sort();
    assert_eq!(on_n1, ["default/p1", "default/p2"]);
    assert_eq!(store.by_index(indexes::BY_OWNER_UID, "u1").len(), 2);
    assert_eq!(store.list_namespace("default").len(), 3);
}

#[tokio::test]
async fn a_dropped_watch_resumes_without_relisting() {
    let fake = FakeApi::new();
    let informers = Informers::new(fake.client());
    let cms = informers.get::<ConfigMap>();
    cms.wait_synced().await;
    let seen = recorder(&cms);
    wait_for("the watch to open", || fake.open_watches() == 1).await;
    fake.close_watches();
    // Written while no watch is open: the resumed watch replays it.
    fake.insert(&configmap("during", "web"));
    wait_for("the change made while disconnected", || {
        seen.lock().len() == 1
    })
    .await;
    assert_eq!(*seen.lock(), ["ADDED default/during"]);
    assert_eq!(
        fake.calls_to(Verb::List, "configmaps").len(),
        1,
        "resumed, not relisted"
    );
    assert!(fake.calls_to(Verb::Watch, "configmaps").len() >= 2);
}

#[tokio::test]
async fn after_410_a_relist_dispatches_the_differences() {
    let fake = FakeApi::new();
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    for name in ["stays", "changes", "goes"] {
        fake.insert(&configmap(name, "web"));
    }
    let informers = Informers::new(fake.client());
    let cms = informers.get::<ConfigMap>();
    cms.wait_synced().await;
    let seen = recorder(&cms);
    seen.lock().clear();
    wait_for("the watch to open", || fake.open_watches() == 1).await;
    // Stop the watch from seeing changes, then make the history unreachable.
    fake.set_watch_delay("configmaps", Duration::from_secs(3600));
    fake.close_watches();
    wait_for("the delayed watch to open", || fake.open_watches() == 1).await;
    let patch = json!({"data": {"k": "new"}});
    api.patch("changes", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete("goes", &DeleteParams::default()).await.unwrap();
    fake.insert(&configmap("new", "web"));
    fake.set_watch_delay("configmaps", Duration::ZERO);
    fake.compact();
    fake.close_watches();
    wait_for("the relist's differences", || seen.lock().len() == 3).await;
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(
        got,
        [
            "ADDED default/new",
            "DELETED default/goes",
            "UPDATED default/changes"
        ]
    );
    assert_eq!(fake.calls_to(Verb::List, "configmaps").len(), 2);
    let store = cms.store();
    assert_eq!(store.len(), 3);
    assert_eq!(
        store
            .get(Some("default"), "changes")
            .unwrap()
            .data
            .as_ref()
            .unwrap()["k"],
        "new"
    );
}

#[tokio::test]
async fn a_custom_transform_runs_after_the_default() {
    let fake = FakeApi::new();
    fake.insert(&configmap("a", "web"));
    let informers = Informers::new(fake.client());
    informers.set_transform::<ConfigMap>(|cm| cm.data = None);
    let cms = informers.get::<ConfigMap>();
    cms.wait_synced().await;
    let cached = cms.store().get(Some("default"), "a").unwrap();
    assert!(cached.data.is_none());
    assert!(cached.metadata.managed_fields.is_none());
}

#[tokio::test]
async fn an_adopted_informer_is_shared_and_outlives_the_factory_that_borrowed_it() {
    let fake = FakeApi::new();
    let process = Informers::new(fake.client());
    let owned = process.get::<ConfigMap>();
    owned.wait_synced().await;
    let all = recorder(&owned);
    let term = Informers::new(fake.client());
    term.adopt(&owned);
    let borrowed = term.get::<ConfigMap>();
    term.wait_synced().await;
    let in_term = recorder(&borrowed);
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    api.create(&PostParams::default(), &configmap("a", "web"))
        .await
        .unwrap();
    wait_for("both handlers to see a", || {
        all.lock().len() == 1 && in_term.lock().len() == 1
    })
    .await;
    // One watch: the borrowing factory started none of its own.
    assert_eq!(fake.open_watches(), 1);
    term.shutdown();
    api.create(&PostParams::default(), &configmap("b", "web"))
        .await
        .unwrap();
    wait_for("the owner's handler to see b", || all.lock().len() == 2).await;
    assert_eq!(*in_term.lock(), ["ADDED default/a"]);
    assert_eq!(borrowed.store().len(), 2, "the cache goes on");
}
