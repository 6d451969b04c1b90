use capstan_client::informer::Informer;
use capstan_client::testing::{ApiError, FakeApi, Verb};
use k8s_openapi::api::core::v1::{Endpoints, Event, Pod, Service};
use serde_json::json;

use super::sync::{Syncer, HEADLESS};
use crate::context::Reconciler;
use crate::testkit::{context, eventually, object};

pub fn service(name: &str, spec: serde_json::Value) -> Service {
    object(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"team": "a"}},
        "spec": spec,
    }))
}

pub fn web_service() -> Service {
    service(
        "web",
        json!({"clusterIP": "10.96.0.10", "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}),
    )
}

pub fn pod(name: &str, ip: &str, ready: bool) -> Pod {
    object(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
            "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
    }))
}

struct Harness {
    /// Holds the informers running.
    _ctx: std::sync::Arc<crate::context::Context>,
    syncer: Syncer,
    services: Informer<Service>,
    pods: Informer<Pod>,
    endpoints: Informer<Endpoints>,
}

async fn harness(fake: &FakeApi) -> Harness {
    let ctx = context(fake);
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let endpoints = ctx.informers.get::<Endpoints>();
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        services: services.store(),
        pods: pods.store(),
        endpoints: endpoints.store(),
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
    };
    Harness {
        _ctx: ctx,
        syncer,
        services,
        pods,
        endpoints,
    }
}

impl Harness {
    async fn caught_up(&self, fake: &FakeApi) {
        eventually("the caches to catch up", || async {
            let same = self.services.store().len() == fake.list::<Service>().len()
                && self.pods.store().len() == fake.list::<Pod>().len()
                && self.endpoints.store().len() == fake.list::<Endpoints>().len();
            same.then_some(())
        })
        .await;
    }
}

fn ips(endpoints: &Endpoints, ready: bool) -> Vec<String> {
    endpoints
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| match ready {
            true => s.addresses.clone().unwrap_or_default(),
            false => s.not_ready_addresses.clone().unwrap_or_default(),
        })
        .map(|a| a.ip)
        .collect()
}

#[tokio::test]
async fn endpoints_follow_the_pods_readiness() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&web_service());
    fake.insert(&pod("web-1", "10.0.0.1", true));
    fake.insert(&pod("web-2", "10.0.0.2", false));
    let mut stranger = pod("other", "10.0.0.3", true);
    stranger.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    fake.insert(&stranger);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let written: Endpoints = fake.get(Some("default"), "web").unwrap();
    assert_eq!(ips(&written, true), ["10.0.0.1"]);
    assert_eq!(ips(&written, false), ["10.0.0.2"]);
    let port = &written.subsets.as_ref().unwrap()[0].ports.as_ref().unwrap()[0];
    assert_eq!((port.port, port.name.as_deref()), (8080, Some("http")));
    let labels = written.metadata.labels.unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert!(!labels.contains_key(HEADLESS));

    fake.insert(&pod("web-2", "10.0.0.2", true));
    h.caught_up(&fake).await;
    eventually("the ready pod in the cache", || async {
        let cached = h.pods.store().get(Some("default"), "web-2")?;
        crate::pods::is_ready(&cached).then_some(())
    })
    .await;
    h.syncer.sync("default/web").await.unwrap();
    let written: Endpoints = fake.get(Some("default"), "web").unwrap();
    assert_eq!(ips(&written, true), ["10.0.0.1", "10.0.0.2"]);
    assert!(ips(&written, false).is_empty());
}

#[tokio::test]
async fn an_unchanged_world_writes_nothing() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&web_service());
    fake.insert(&pod("web-1", "10.0.0.1", true));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    h.caught_up(&fake).await;
    fake.clear_calls();
    h.syncer.sync("default/web").await.unwrap();
    assert!(fake.calls_to(Verb::Update, "endpoints").is_empty());
    assert!(fake.calls_to(Verb::Create, "endpoints").is_empty());
}

#[tokio::test]
async fn a_deleted_service_loses_its_endpoints_and_selectorless_ones_are_left_alone() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let hand_written: Endpoints = object(json!({
        "metadata": {"name": "external", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "192.168.1.1"}], "ports": [{"port": 5432}]}],
    }));
    fake.insert(&service(
        "external",
        json!({"clusterIP": "10.96.0.11",
        "ports": [{"port": 5432}]}),
    ));
    fake.insert(&hand_written);
    fake.insert(&pod("web-1", "10.0.0.1", true));
    h.caught_up(&fake).await;
    h.syncer.sync("default/external").await.unwrap();
    let kept: Endpoints = fake.get(Some("default"), "external").unwrap();
    assert_eq!(ips(&kept, true), ["192.168.1.1"]);
    // The Service of "web" never existed (or is gone): its Endpoints go.
    fake.insert(&object::<Endpoints>(
        json!({"metadata": {"name": "web", "namespace": "default"}}),
    ));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    assert!(fake.get::<Endpoints>(Some("default"), "web").is_none());
    // Deleting what is not there is no error.
    h.syncer.sync("default/web").await.unwrap();
}

#[tokio::test]
async fn headless_services_are_labelled_and_hostnames_published() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&service(
        "web",
        json!({"clusterIP": "None", "selector": {"app": "web"}}),
    ));
    let mut named = pod("web-0", "10.0.0.7", true);
    let spec = named.spec.as_mut().unwrap();
    spec.hostname = Some("web-0".into());
    spec.subdomain = Some("web".into());
    fake.insert(&named);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let written: Endpoints = fake.get(Some("default"), "web").unwrap();
    assert!(written.metadata.labels.unwrap().contains_key(HEADLESS));
    let subsets = written.subsets.unwrap();
    let address = &subsets[0].addresses.as_ref().unwrap()[0];
    assert_eq!(address.hostname.as_deref(), Some("web-0"));
    assert_eq!(address.node_name.as_deref(), Some("n1"));
}

#[tokio::test]
async fn a_refused_write_is_an_event_and_an_error() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&web_service());
    h.caught_up(&fake).await;
    fake.fail_next(
        Verb::Create,
        "endpoints",
        1,
        ApiError::new(403, "Forbidden", "endpoints is forbidden: no"),
    );
    let err = h.syncer.sync("default/web").await.unwrap_err();
    assert_eq!(err.code(), Some(403));
    let event = eventually("the warning event", || async {
        fake.list::<Event>().into_iter().next()
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("FailedToCreateEndpoint"));
    assert!(event
        .message
        .unwrap()
        .starts_with("Failed to create endpoint for service default/web:"));
    // The retry writes it.
    h.syncer.sync("default/web").await.unwrap();
    let written: Endpoints = fake.get(Some("default"), "web").unwrap();
    assert!(written.subsets.unwrap_or_default().is_empty());
}
