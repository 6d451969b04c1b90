//! The in-memory API driven through kube-rs, as the components drive it.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Binding, ConfigMap, ObjectReference, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use super::*;

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().cloned().collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"},
    }))
    .unwrap()
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": node},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn reason(error: kube::Error) -> (u16, String, String) {
    match error {
        kube::Error::Api(status) => (status.code, status.reason, status.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn create_get_conflict_and_delete_as_kube_answers_them() {
    let fake = FakeApi::new();
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let pp = PostParams::default();
    let created = api.create(&pp, &configmap("one", &[])).await.unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    let duplicate = api.create(&pp, &configmap("one", &[])).await.unwrap_err();
    assert_eq!(
        reason(duplicate),
        (
            409,
            "AlreadyExists".into(),
            "configmaps \"one\" already exists".into()
        )
    );

    let mut fresh = api.get("one").await.unwrap();
    fresh.data = Some(BTreeMap::from([("k".into(), "v2".into())]));
    let replaced = api.replace("one", &pp, &fresh).await.unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        fresh.metadata.resource_version
    );
    let (code, why, message) = reason(api.replace("one", &pp, &fresh).await.unwrap_err());
    assert_eq!((code, why.as_str()), (409, "Conflict"));
    assert!(
        message.contains("the object has been modified"),
        "{message}"
    );

    // A no-op write changes nothing, not even the version.
    let again = api.replace("one", &pp, &replaced).await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        replaced.metadata.resource_version
    );

    let mut generated = configmap("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let made = api.create(&pp, &generated).await.unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    api.delete("one", &DeleteParams::default()).await.unwrap();
    assert_eq!(reason(api.get("one").await.unwrap_err()).0, 404);
    assert_eq!(
        reason(
            api.delete("one", &DeleteParams::default())
                .await
                .unwrap_err()
        )
        .0,
        404
    );
}

#[tokio::test]
async fn status_only_through_the_subresource_and_generation_follows_the_spec() {
    let fake = FakeApi::new();
    let api: Api<Pod> = Api::namespaced(fake.client(), "default");
    let created = api
        .create(&PostParams::default(), &pod("p", None))
        .await
        .unwrap();
    assert!(created.status.is_none(), "create drops status");
    assert_eq!(created.metadata.generation, Some(1));

    let status = json!({"status": {"phase": "Running"}});
    let with_status = api
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        with_status.status.unwrap().phase.as_deref(),
        Some("Running")
    );

    // A main-resource write cannot change status; a label is not a spec change.
    let patch = json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Failed"}});
    let labelled = api
        .patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(labelled.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(labelled.metadata.generation, Some(1));
    let spec = json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
    let changed = api
        .patch("p", &PatchParams::default(), &Patch::Strategic(&spec))
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    assert_eq!(
        changed.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:2")
    );
}

#[tokio::test]
async fn binding_sets_the_node_once_and_bound_pods_are_deleted_gracefully() {
    let fake = FakeApi::new();
    let api: Api<Pod> = Api::namespaced(fake.client(), "default");
    api.create(&PostParams::default(), &pod("p", None))
        .await
        .unwrap();
    let binding = Binding {
        metadata: kube::api::ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        target: ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        },
    };
    let data = serde_json::to_vec(&binding).unwrap();
    api.create_subresource::<serde_json::Value>(
        "binding",
        "p",
        &PostParams::default(),
        data.clone(),
    )
    .await
    .unwrap();
    let bound = api.get("p").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    let conditions = bound.status.unwrap().conditions.unwrap();
    assert!(conditions
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    let again = api
        .create_subresource::<serde_json::Value>("binding", "p", &PostParams::default(), data)
        .await;
    let (code, _, message) = reason(again.unwrap_err());
    assert_eq!(code, 409);
    assert!(
        message.contains("already assigned to node \"n1\""),
        "{message}"
    );

    // Bound: terminating, until the kubelet's grace-0 delete.
    api.delete("p", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("p").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    api.delete(
        "p",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(api.get_opt("p").await.unwrap().is_none());
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_removed_and_preconditions_are_checked() {
    let fake = FakeApi::new();
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let mut cm = configmap("held", &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(reason(api.delete("held", &wrong).await.unwrap_err()).0, 409);
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.uid, created.metadata.uid);
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none());
}

#[tokio::test]
async fn lists_and_watches_honour_selectors_and_versions() {
    let fake = FakeApi::new();
    let api: Api<Pod> = Api::namespaced(fake.client(), "default");
    fake.insert(&pod("a", Some("n1")));
    fake.insert(&pod("b", Some("n2")));
    let on_n1 = api
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 1);
    assert_eq!(
        on_n1.items[0].status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
    let from = on_n1.metadata.resource_version.unwrap();

    let params = WatchParams::default().labels("app=web").timeout(30);
    let mut events = api.watch(&params, &from).await.unwrap().boxed();
    // Leaves the selection: DELETED for this watcher; comes back: ADDED.
    let unlabel = json!({"metadata": {"labels": {"app": "db"}}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&unlabel))
        .await
        .unwrap();
    let relabel = json!({"metadata": {"labels": {"app": "web"}}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    api.delete(
        "b",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => seen.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Modified(p) => seen.push(format!("MODIFIED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => seen.push(format!("DELETED {}", p.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["DELETED a", "ADDED a", "DELETED b"]);

    // A compacted version is 410 Expired.
    fake.compact();
    let mut stale = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    match stale.next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn watches_send_bookmarks_and_end_at_their_timeout() {
    let fake = FakeApi::new();
    fake.set_bookmark_interval(std::time::Duration::from_secs(1));
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    api.create(&PostParams::default(), &configmap("c", &[]))
        .await
        .unwrap();
    let version = fake.resource_version().to_string();
    let params = WatchParams::default().timeout(3);
    let events: Vec<_> = api
        .watch(&params, &version)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let bookmarks = events
        .iter()
        .filter(|e| matches!(e, WatchEvent::Bookmark(_)))
        .count();
    assert!((2..=3).contains(&bookmarks), "{events:?}");
}

#[tokio::test]
async fn injected_failures_and_the_call_log() {
    let fake = FakeApi::new();
    let connection = fake.connection("test-component");
    let node = connection
        .impersonating("system:node:n1", &["system:nodes"])
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(node, "default");
    fake.fail_next(
        Verb::Create,
        "configmaps",
        2,
        ApiError::new(500, "InternalError", "boom"),
    );
    for _ in 0..2 {
        assert_eq!(
            reason(
                api.create(&PostParams::default(), &configmap("x", &[]))
                    .await
                    .unwrap_err()
            )
            .0,
            500
        );
    }
    api.create(&PostParams::default(), &configmap("x", &[]))
        .await
        .unwrap();
    let creates = fake.calls_to(Verb::Create, "configmaps");
    assert_eq!(creates.len(), 3);
    let last = creates.last().unwrap();
    assert_eq!(last.user.as_deref(), Some("system:node:n1"));
    assert_eq!(last.groups, ["system:nodes"]);
    assert!(
        last.user_agent
            .as_deref()
            .unwrap()
            .starts_with("test-component/v"),
        "{last:?}"
    );
    assert_eq!(last.body.as_ref().unwrap()["metadata"]["name"], "x");
}

#[tokio::test]
async fn the_scale_subresource_reads_and_sets_replicas() {
    use k8s_openapi::api::apps::v1::Deployment;
    let fake = FakeApi::new();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            "template": {"metadata": {"labels": {"app": "web", "tier": "a"}}}},
        "status": {"replicas": 2},
    }))
    .unwrap();
    fake.insert(&deployment);
    let api: kube::Api<Deployment> = kube::Api::namespaced(fake.client(), "default");
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    let status = scale.status.unwrap();
    assert_eq!(status.replicas, 2);
    assert_eq!(status.selector.as_deref(), Some("app=web,tier in (a,b)"));
    let patch = serde_json::json!({"spec": {"replicas": 5}});
    let params = kube::api::PatchParams::default();
    api.patch_scale("web", &params, &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    let stored: Deployment = fake.get(Some("default"), "web").unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(5));
    let stale = serde_json::json!({"metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 1}});
    let err = api
        .replace_scale(
            "web",
            &Default::default(),
            serde_json::to_vec(&stale).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
    assert!(api.get_scale("missing").await.is_err());
}
