//! The generic flow on the in-memory storage: the cases every resource
//! type goes through, without a store process.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cache::EventType;
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::registry::actor::{ResourceActor, Watch};
use crate::registry::flow::{self, Handle, Part};
use crate::registry::kinds;
use crate::registry::options::{DeleteOptions, ListOptions, WriteOptions};
use crate::storage::MemoryStorage;

/// The core type `resource` on `store`.
pub(super) fn handle(store: &Arc<MemoryStorage>, resource: &str) -> Handle {
    let strategy = kinds::all()
        .into_iter()
        .find(|s| s.def().group.is_empty() && s.def().resource == resource)
        .expect("a core type");
    Handle {
        strategy,
        store: store.clone(),
        prefix: "/registry".into(),
        namespace_contents: Default::default(),
        expiry: None,
        admission: Arc::new(crate::admission::Chain::default()),
    }
}

/// A store holding the namespace `default`.
pub(super) async fn with_default_namespace() -> Arc<MemoryStorage> {
    let store = Arc::new(MemoryStorage::new());
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    flow::create(
        &handle(&store, "namespaces"),
        "",
        namespace,
        WriteOptions::default(),
    )
    .await
    .expect("the namespace is created");
    store
}

pub(super) fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Creates the ConfigMap `name` in `default`; the object as created.
async fn create_config_map(h: &Handle, name: &str, data: Value) -> Value {
    let object = config_map(name, data);
    let created = flow::create(h, "default", object, WriteOptions::default()).await;
    created.expect("the ConfigMap is created").body
}

fn rv(object: &Value) -> i64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .expect("a resourceVersion")
}

#[tokio::test]
async fn create_sets_metadata_and_refuses_a_second_object_of_the_name() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    let body = config_map("a", json!({"k": "v"}));
    let reply = flow::create(&h, "default", body.clone(), WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(reply.code, 201);
    assert_eq!(reply.body["metadata"]["namespace"], "default");
    assert!(reply.body["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty()));
    let stored = flow::get(&h, "default", "a", Part::Main).await.unwrap();
    assert_eq!(rv(&stored), rv(&reply.body));
    let again = flow::create(&h, "default", body.clone(), WriteOptions::default()).await;
    assert!(
        matches!(again, Err(ApiError::AlreadyExists(_))),
        "{again:?}"
    );
    // A namespace that does not exist is admission's to refuse
    // (`NamespaceLifecycle`), not the flow's.
}

#[tokio::test]
async fn an_update_with_a_stale_resource_version_is_a_conflict() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    let created = create_config_map(&h, "a", json!({"k": "1"})).await;
    let mut first = created.clone();
    first["data"]["k"] = "2".into();
    let updated = flow::update(
        &h,
        "default",
        "a",
        Part::Main,
        first,
        WriteOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(updated.code, 200);
    assert!(rv(&updated.body) > rv(&created));
    // Written on top of the first version: someone else wrote since.
    let mut stale = created;
    stale["data"]["k"] = "3".into();
    let refused = flow::update(
        &h,
        "default",
        "a",
        Part::Main,
        stale,
        WriteOptions::default(),
    )
    .await;
    match refused {
        Err(err @ ApiError::Conflict(..)) => assert_eq!(err.code(), 409),
        other => panic!("a stale update must be a conflict: {other:?}"),
    }
    let now = flow::get(&h, "default", "a", Part::Main).await.unwrap();
    assert_eq!(now["data"]["k"], "2");
}

#[tokio::test]
async fn a_merge_patch_changes_only_what_it_names() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    let body = config_map("a", json!({"keep": "1", "change": "1"}));
    let created = flow::create(&h, "default", body, WriteOptions::default())
        .await
        .unwrap()
        .body;
    let patch = json!({"data": {"change": "2", "added": "3"}});
    let options = WriteOptions::by("test");
    let patched = flow::patch(
        &h,
        "default",
        "a",
        Part::Main,
        PatchType::Merge,
        patch,
        options,
    )
    .await
    .unwrap();
    assert_eq!(
        patched.body["data"],
        json!({"keep": "1", "change": "2", "added": "3"})
    );
    assert!(rv(&patched.body) > rv(&created));
    assert_eq!(
        flow::get(&h, "default", "a", Part::Main).await.unwrap()["data"],
        patched.body["data"]
    );
}

#[tokio::test]
async fn a_finalizer_holds_a_deletion_until_it_is_removed() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    let mut body = config_map("a", json!({}));
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    flow::create(&h, "default", body, WriteOptions::default())
        .await
        .unwrap();
    let marked = flow::delete(&h, "default", "a", DeleteOptions::default())
        .await
        .unwrap()
        .body;
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let held = flow::get(&h, "default", "a", Part::Main).await.unwrap();
    assert_eq!(held["metadata"]["finalizers"], json!(["example.com/hold"]));
    let release = json!({"metadata": {"finalizers": null}});
    let options = WriteOptions::by("test");
    flow::patch(
        &h,
        "default",
        "a",
        Part::Main,
        PatchType::Merge,
        release,
        options,
    )
    .await
    .unwrap();
    let gone = flow::get(&h, "default", "a", Part::Main).await;
    assert!(matches!(gone, Err(ApiError::NotFound(_))), "{gone:?}");
}

#[tokio::test]
async fn a_pod_on_a_node_gets_its_grace_period() {
    let store = with_default_namespace().await;
    let h = handle(&store, "pods");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "busybox"}]}});
    flow::create(&h, "default", pod, WriteOptions::default())
        .await
        .unwrap();
    let marked = flow::delete(&h, "default", "p", DeleteOptions::default())
        .await
        .unwrap()
        .body;
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(
        flow::get(&h, "default", "p", Part::Main).await.is_ok(),
        "the pod stays while its grace period runs"
    );
    let now = DeleteOptions {
        grace_period: Some(0),
        ..Default::default()
    };
    flow::delete(&h, "default", "p", now).await.unwrap();
    let gone = flow::get(&h, "default", "p", Part::Main).await;
    assert!(
        matches!(gone, Err(ApiError::NotFound(_))),
        "a zero grace period deletes: {gone:?}"
    );
}

#[tokio::test]
async fn list_pages_read_one_snapshot_across_a_concurrent_write() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    for name in ["a", "b", "c"] {
        flow::create(
            &h,
            "default",
            config_map(name, json!({})),
            WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    let first_options = ListOptions {
        limit: 2,
        ..Default::default()
    };
    let first = flow::list(&h, Some("default"), first_options)
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    assert_eq!(first.remaining, Some(1));
    let token = first.continue_token.clone().expect("a continue token");
    flow::create(
        &h,
        "default",
        config_map("d", json!({})),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    flow::delete(&h, "default", "c", DeleteOptions::default())
        .await
        .unwrap();
    let rest_options = ListOptions {
        limit: 2,
        continue_token: Some(token),
        ..Default::default()
    };
    let rest = flow::list(&h, Some("default"), rest_options).await.unwrap();
    let names: Vec<&str> = rest.items.iter().map(|o| o.name()).collect();
    assert_eq!(
        names,
        ["c"],
        "the second page is read at the first page's revision"
    );
    assert_eq!(rest.revision, first.revision);
    let now = flow::list(&h, Some("default"), ListOptions::default())
        .await
        .unwrap();
    let names: Vec<&str> = now.items.iter().map(|o| o.name()).collect();
    assert_eq!(names, ["a", "b", "d"]);
}

#[actix_rt::test]
async fn a_watch_from_a_revision_sees_what_came_after_it() {
    let store = with_default_namespace().await;
    let h = handle(&store, "configmaps");
    let first = flow::create(
        &h,
        "default",
        config_map("a", json!({"k": "1"})),
        WriteOptions::default(),
    )
    .await
    .unwrap()
    .body;
    let (actor, _) = ResourceActor::start(h.clone(), &actix::Arbiter::current())
        .await
        .unwrap();
    let mut second = first.clone();
    second["data"]["k"] = "2".into();
    flow::update(
        &h,
        "default",
        "a",
        Part::Main,
        second,
        WriteOptions::default(),
    )
    .await
    .unwrap();
    flow::create(
        &h,
        "default",
        config_map("b", json!({})),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    let options = ListOptions {
        watch: true,
        resource_version: Some(rv(&first).to_string()),
        ..Default::default()
    };
    let watch = Watch {
        namespace: Some("default".into()),
        options,
    };
    let mut events = actor
        .send(watch)
        .await
        .expect("the actor answers")
        .expect("the watch opens");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let next = tokio::time::timeout(Duration::from_secs(20), events.recv()).await;
        let item = next
            .expect("a watch event within 20s")
            .expect("the watch stays open");
        seen.push((item.kind, item.object.name().to_string()));
    }
    assert_eq!(
        seen,
        [
            (EventType::Modified, "a".to_string()),
            (EventType::Added, "b".to_string())
        ]
    );
}

/// Writes and deletes through a watch cache that trails the store (its
/// feed is never run): they start from the cached copy, and what it
/// refuses is decided again on the store's.
#[tokio::test]
async fn writes_through_a_trailing_watch_cache_are_decided_on_the_stores_copy() {
    let store = with_default_namespace().await;
    let direct = handle(&store, "configmaps");
    let created = create_config_map(&direct, "a", json!({"k": "1"})).await;
    let prefix = "/registry/configmaps/".to_string();
    let (cacher, _feed) = crate::cache::Cacher::start(store.clone(), prefix, &[])
        .await
        .unwrap();
    let cached = Handle {
        store: cacher,
        ..handle(&store, "configmaps")
    };
    let mut second = created.clone();
    second["data"]["k"] = "2".into();
    let options = WriteOptions::default;
    let second = flow::update(&direct, "default", "a", Part::Main, second, options())
        .await
        .unwrap()
        .body;
    // Pinned to the store's revision, which the cache has not seen.
    let mut third = second.clone();
    third["data"]["k"] = "3".into();
    let third = flow::update(&cached, "default", "a", Part::Main, third, options())
        .await
        .expect("refused on the cached copy, written on the store's")
        .body;
    assert_eq!(third["data"]["k"], "3");
    // Pinned to a revision that is gone: a conflict on both copies.
    let mut stale = second;
    stale["data"]["k"] = "4".into();
    let refused = flow::update(&cached, "default", "a", Part::Main, stale, options()).await;
    assert!(
        matches!(refused, Err(ApiError::Conflict(..))),
        "{refused:?}"
    );
    // A delete whose precondition only the store's copy meets.
    let pinned = DeleteOptions {
        resource_version: Some(rv(&third).to_string()),
        ..DeleteOptions::default()
    };
    flow::delete(&cached, "default", "a", pinned)
        .await
        .expect("deleted on the store's copy");
    let gone = flow::get(&direct, "default", "a", Part::Main).await;
    assert!(matches!(gone, Err(ApiError::NotFound(..))), "{gone:?}");
    // Deleting what only the cache still holds is NotFound.
    let again = flow::delete(&cached, "default", "a", DeleteOptions::default()).await;
    assert!(matches!(again, Err(ApiError::NotFound(..))), "{again:?}");
}
