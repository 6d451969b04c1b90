//! The `kube` crate (kube-rs) as a client of `capstan-apiserver`: typed
//! CRUD with the errors it maps, subresources, and a reflector that stays
//! in sync while the store under the API server is killed and restarted.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Client;
use serde_json::json;

use capstan_tests::apiserver::{ApiCluster, Backend};

fn client(port: u16) -> Client {
    let mut config = capstan_tests::tls::kube_config(port);
    config.read_timeout = Some(Duration::from_secs(60));
    Client::try_from(config).expect("a kube client")
}

fn configmap(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().cloned().collect::<BTreeMap<_, _>>()},
        "data": data.iter().cloned().collect::<BTreeMap<_, _>>(),
    }))
    .unwrap()
}

fn reason(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason),
        other => panic!("not an API error: {other}"),
    }
}

capstan_tests::on_both_backends!(
    async:
    typed_crud_subresources_and_errors,
    a_leader_election_lease,
    a_reflector_stays_in_sync_across_a_store_restart,
);

async fn typed_crud_subresources_and_errors(backend: Backend) {
    let cluster = tokio::task::block_in_place(|| ApiCluster::start_on(backend));
    let client = client(cluster.port);
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();

    let created = cms
        .create(&pp, &configmap("one", &[("app", "kr")], &[("k", "v")]))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().expect("a uid");
    assert!(created.metadata.resource_version.is_some());
    let got = cms.get("one").await.unwrap();
    assert_eq!(got.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(got.data.unwrap()["k"], "v");
    let duplicate = cms
        .create(&pp, &configmap("one", &[], &[]))
        .await
        .unwrap_err();
    assert_eq!(reason(duplicate), (409, "AlreadyExists".into()));
    assert!(cms.get_opt("missing").await.unwrap().is_none());
    let missing = cms.get("missing").await.unwrap_err();
    assert_eq!(reason(missing), (404, "NotFound".into()));

    // Replace with the current version works; with a stale one, Conflict.
    let mut fresh = cms.get("one").await.unwrap();
    fresh.data = Some(BTreeMap::from([("k".into(), "v2".into())]));
    let replaced = cms.replace("one", &pp, &fresh).await.unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        fresh.metadata.resource_version
    );
    let stale = cms.replace("one", &pp, &fresh).await.unwrap_err();
    assert_eq!(reason(stale), (409, "Conflict".into()));

    // The three patch types.
    let params = PatchParams::default();
    cms.patch("one", &params, &Patch::Merge(json!({"data": {"m": "1"}})))
        .await
        .unwrap();
    cms.patch(
        "one",
        &params,
        &Patch::Strategic(json!({"metadata": {"labels": {"s": "1"}}})),
    )
    .await
    .unwrap();
    let remove = serde_json::from_value(json!([{"op": "remove", "path": "/data/k"}])).unwrap();
    let patched = cms
        .patch("one", &params, &Patch::Json::<()>(remove))
        .await
        .unwrap();
    assert_eq!(
        patched.data.unwrap(),
        BTreeMap::from([("m".to_string(), "1".to_string())])
    );
    assert_eq!(patched.metadata.labels.unwrap()["s"], "1");

    // Lists: selectors, pages, metadata only.
    for i in 0..5 {
        let name = format!("page-{i}");
        cms.create(
            &pp,
            &configmap(&name, &[("app", "kr"), ("page", "yes")], &[]),
        )
        .await
        .unwrap();
    }
    let selected = cms
        .list(&ListParams::default().labels("page=yes"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 5);
    let first = cms
        .list(&ListParams::default().labels("app=kr").limit(4))
        .await
        .unwrap();
    assert_eq!(first.items.len(), 4);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let rest = cms
        .list(
            &ListParams::default()
                .labels("app=kr")
                .limit(4)
                .continue_token(&token),
        )
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 2);
    let metadata = cms
        .list_metadata(&ListParams::default().labels("app=kr"))
        .await
        .unwrap();
    assert_eq!(metadata.items.len(), 6);
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("page=yes"),
        )
        .await
        .unwrap();
    assert_eq!(deleted.left().map(|l| l.items.len()), Some(5));
    cms.delete("one", &DeleteParams::default()).await.unwrap();
    // Only the kube-root-ca.crt ConfigMap every namespace has is left.
    let left = cms.list(&ListParams::default()).await.unwrap().items;
    assert!(
        left.iter()
            .all(|cm| cm.metadata.name.as_deref() == Some("kube-root-ca.crt")),
        "{left:?}"
    );

    // Pods start Pending; deployments scale through /scale.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    let pod = pods.create(&pp, &pod).await.unwrap();
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Pending"));
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))
    .unwrap();
    deployments.create(&pp, &deployment).await.unwrap();
    let scale = deployments
        .patch_scale(
            "d",
            &params,
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(
        deployments
            .get_scale("d")
            .await
            .unwrap()
            .status
            .unwrap()
            .selector
            .as_deref(),
        Some("app=d")
    );
    assert_eq!(
        deployments.get("d").await.unwrap().spec.unwrap().replicas,
        Some(3)
    );

    let namespaces: Api<Namespace> = Api::all(client);
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
}

/// Leader election as client-go's lease lock does it: create to acquire,
/// replace with the read resourceVersion to renew or take over; the store's
/// compare-and-swap lets exactly one candidate win each round.
async fn a_leader_election_lease(backend: Backend) {
    let cluster = tokio::task::block_in_place(|| ApiCluster::start_on(backend));
    let client = client(cluster.port);
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let lease = |holder: &str| -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": "controller"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "acquireTime": "2026-01-01T00:00:00.000000Z",
                     "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0},
        }))
        .unwrap()
    };

    // Eight candidates race to create the lease: exactly one wins.
    let mut racers = Vec::new();
    for i in 0..8 {
        let (leases, lease) = (leases.clone(), lease(&format!("candidate-{i}")));
        racers.push(tokio::spawn(async move {
            leases.create(&PostParams::default(), &lease).await
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(won) => winners.push(won.spec.unwrap().holder_identity.unwrap()),
            Err(err) => assert_eq!(reason(err), (409, "AlreadyExists".into())),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let holder = leases.get("controller").await.unwrap();
    assert_eq!(
        holder.spec.as_ref().unwrap().holder_identity.as_ref(),
        Some(&winners[0])
    );

    // Everyone read the same version; each tries to take over with it:
    // exactly one replace succeeds, the others get a Conflict.
    let mut racers = Vec::new();
    for i in 0..8 {
        let (leases, mut take) = (leases.clone(), holder.clone());
        take.spec.as_mut().unwrap().holder_identity = Some(format!("taker-{i}"));
        take.spec.as_mut().unwrap().lease_transitions = Some(1);
        racers.push(tokio::spawn(async move {
            leases
                .replace("controller", &PostParams::default(), &take)
                .await
        }));
    }
    let mut takers = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(taken) => takers.push(taken.spec.unwrap().holder_identity.unwrap()),
            Err(err) => assert_eq!(reason(err), (409, "Conflict".into())),
        }
    }
    assert_eq!(takers.len(), 1, "{takers:?}");
    let now = leases.get("controller").await.unwrap();
    let spec = now.spec.unwrap();
    assert_eq!(spec.holder_identity.as_ref(), Some(&takers[0]));
    assert_eq!(spec.lease_transitions, Some(1));
}

/// A reflector (list, then watch, re-watching from its last revision)
/// keeps the same view as the API server while the store under it is
/// killed with SIGKILL and started again.
async fn a_reflector_stays_in_sync_across_a_store_restart(backend: Backend) {
    let mut cluster = tokio::task::block_in_place(|| ApiCluster::start_on(backend));
    let client = client(cluster.port);
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let pp = PostParams::default();
    for name in ["a", "b"] {
        cms.create(&pp, &configmap(name, &[("app", "sync")], &[("v", "0")]))
            .await
            .unwrap();
    }
    let (reader, writer) = reflector::store::<ConfigMap>();
    let config = watcher::Config::default().labels("app=sync");
    let stream = reflector(writer, watcher(cms.clone(), config))
        .default_backoff()
        .applied_objects();
    let driver = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    wait_for(&reader, &[("a", "0"), ("b", "0")]).await;

    tokio::task::block_in_place(|| cluster.store.kill9_and_restart());

    // Writes after the restart, through the same API server, retried while
    // it reconnects to the store.
    let merge = |v: &str| Patch::Merge(json!({"data": {"v": v}}));
    // Only "the store is unavailable" (503, 504) is worth a retry; any
    // other error is a wrong answer and fails at once.
    let mut written = false;
    for _ in 0..100 {
        match cms.patch("b", &PatchParams::default(), &merge("1")).await {
            Ok(_) => {
                written = true;
                break;
            }
            Err(kube::Error::Api(status)) if matches!(status.code, 503 | 504) => {}
            Err(other) => panic!("a write after the store restart failed: {other}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(written, "the API server did not reach the restarted store");
    cms.create(&pp, &configmap("c", &[("app", "sync")], &[("v", "0")]))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    cms.create(&pp, &configmap("other", &[("app", "else")], &[]))
        .await
        .unwrap();
    wait_for(&reader, &[("b", "1"), ("c", "0")]).await;

    // The reflector's view is the API server's.
    let listed: Vec<String> = cms
        .list(&ListParams::default().labels("app=sync"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(listed, vec!["b", "c"]);
    driver.abort();
}

/// (name, data.v) of every object the reflector holds, sorted.
fn view(reader: &reflector::Store<ConfigMap>) -> Vec<(String, String)> {
    let mut view: Vec<(String, String)> = reader
        .state()
        .iter()
        .map(|cm| {
            let name = cm.metadata.name.clone().unwrap();
            let value = cm.data.as_ref().and_then(|d| d.get("v").cloned());
            (name, value.unwrap_or_default())
        })
        .collect();
    view.sort();
    view
}

async fn wait_for(reader: &reflector::Store<ConfigMap>, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    for _ in 0..300 {
        if view(reader) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the reflector shows {:?}, not {want:?}", view(reader));
}
