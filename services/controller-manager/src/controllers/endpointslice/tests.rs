use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Informer;
use capstan_client::testing::{FakeApi, Verb};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use serde_json::json;

use super::sync::Syncer;
use super::tracker::Tracker;
use super::{service_key, BY_SERVICE, CONTROLLER_NAME, MANAGED_BY, SERVICE_NAME};
use crate::context::Reconciler;
use crate::controllers::endpoints::tests::{pod, service, web_service};
use crate::testkit::{context, eventually, object};

struct Harness {
    syncer: Syncer,
    informers: capstan_client::informer::Informers,
    slices: Informer<EndpointSlice>,
}

async fn harness(fake: &FakeApi, max_per_slice: usize) -> Harness {
    let ctx = context(fake);
    let slices = ctx.informers.get::<EndpointSlice>();
    slices.add_index(BY_SERVICE, service_key);
    let services = ctx.informers.get::<Service>();
    let pods = ctx.informers.get::<Pod>();
    let nodes = ctx.informers.get::<Node>();
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        services: services.store(),
        pods: pods.store(),
        nodes: nodes.store(),
        slices: slices.store(),
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
        tracker: Arc::new(Tracker::default()),
        max_per_slice,
    };
    Harness {
        syncer,
        informers: ctx.informers.clone(),
        slices,
    }
}

impl Harness {
    /// Waits for the caches to hold what the API holds, and lets the
    /// tracker see the slices written so far.
    async fn caught_up(&self, fake: &FakeApi) {
        let informers = &self.informers;
        eventually("the caches to catch up", || async {
            let same = informers.get::<Service>().store().len() == fake.list::<Service>().len()
                && informers.get::<Pod>().store().len() == fake.list::<Pod>().len()
                && informers.get::<Node>().store().len() == fake.list::<Node>().len()
                && self.slices.store().len() == fake.list::<EndpointSlice>().len()
                && fake.list::<EndpointSlice>().iter().all(|s| {
                    let cached = self.slices.store().get(
                        s.metadata.namespace.as_deref(),
                        s.metadata.name.as_deref().unwrap(),
                    );
                    cached
                        .is_some_and(|c| c.metadata.resource_version == s.metadata.resource_version)
                });
            same.then_some(())
        })
        .await;
        for slice in self.slices.store().list() {
            for owner in service_key(&slice) {
                self.syncer.tracker.observe(&owner, &slice, false);
            }
        }
    }
}

fn endpoints_of(slices: &[EndpointSlice]) -> Vec<(String, bool, bool, bool)> {
    let mut all: Vec<_> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .map(|e| {
            let c = e.conditions.clone().unwrap_or_default();
            (
                e.addresses[0].clone(),
                c.ready.unwrap_or(false),
                c.serving.unwrap_or(false),
                c.terminating.unwrap_or(false),
            )
        })
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn slices_carry_each_pods_conditions_and_kubes_labels() {
    let fake = FakeApi::new();
    let h = harness(&fake, 100).await;
    fake.insert(&object::<Node>(json!({"metadata": {"name": "n1",
        "labels": {"topology.kubernetes.io/zone": "zone-a"}}})));
    let svc = fake.insert(&web_service());
    fake.insert(&pod("web-1", "10.0.0.1", true));
    fake.insert(&pod("web-2", "10.0.0.2", false));
    let mut leaving = pod("web-3", "10.0.0.3", true);
    leaving.metadata.deletion_timestamp = Some(Time(Utc::now()));
    fake.insert(&leaving);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(slice.address_type, "IPv4");
    assert!(slice.metadata.name.as_deref().unwrap().starts_with("web-"));
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(labels[SERVICE_NAME], "web");
    assert_eq!(labels[MANAGED_BY], CONTROLLER_NAME);
    assert_eq!(labels["team"], "a");
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Service", svc.metadata.uid.as_deref().unwrap())
    );
    assert_eq!(
        endpoints_of(&slices),
        [
            ("10.0.0.1".into(), true, true, false),
            ("10.0.0.2".into(), false, false, false),
            ("10.0.0.3".into(), false, true, true),
        ]
    );
    let port = &slice.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.port, port.name.as_deref()),
        (Some(8080), Some("http"))
    );
    let first = &slice.endpoints[0];
    assert_eq!(first.zone.as_deref(), Some("zone-a"));
    assert_eq!(first.node_name.as_deref(), Some("n1"));
}

#[tokio::test]
async fn at_most_max_endpoints_a_slice_and_few_writes_on_change() {
    let fake = FakeApi::new();
    let h = harness(&fake, 2).await;
    fake.insert(&web_service());
    for i in 1..=5 {
        fake.insert(&pod(&format!("web-{i}"), &format!("10.0.0.{i}"), true));
    }
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 3);
    assert!(slices.iter().all(|s| s.endpoints.len() <= 2));
    assert_eq!(endpoints_of(&slices).len(), 5);
    h.caught_up(&fake).await;
    fake.clear_calls();
    h.syncer.sync("default/web").await.unwrap();
    assert!(
        fake.calls()
            .iter()
            .all(|c| c.verb == Verb::Get || c.verb == Verb::List || c.verb == Verb::Watch),
        "an unchanged world writes nothing: {:?}",
        fake.calls()
    );
    // One pod leaves: one slice is rewritten, nothing created.
    kube::Api::<Pod>::namespaced(fake.client(), "default")
        .delete("web-3", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    assert!(fake.calls_to(Verb::Create, "endpointslices").is_empty());
    assert_eq!(fake.calls_to(Verb::Update, "endpointslices").len(), 1);
    assert_eq!(endpoints_of(&fake.list::<EndpointSlice>()).len(), 4);
}

#[tokio::test]
async fn a_lagging_cache_never_duplicates_slices() {
    let fake = FakeApi::new();
    fake.set_watch_delay("endpointslices", Duration::from_millis(400));
    let h = harness(&fake, 100).await;
    fake.insert(&web_service());
    fake.insert(&pod("web-1", "10.0.0.1", true));
    eventually("service and pod cached", || async {
        (h.informers.get::<Pod>().store().len() == 1
            && h.informers.get::<Service>().store().len() == 1)
            .then_some(())
    })
    .await;
    h.syncer.sync("default/web").await.unwrap();
    let err = h.syncer.sync("default/web").await.unwrap_err();
    assert!(err.to_string().contains("out of date"), "{err}");
    assert_eq!(fake.list::<EndpointSlice>().len(), 1);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(fake.list::<EndpointSlice>().len(), 1);
}

#[tokio::test]
async fn no_pods_keeps_one_placeholder_and_no_selector_keeps_none() {
    let fake = FakeApi::new();
    let h = harness(&fake, 100).await;
    fake.insert(&web_service());
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 1);
    assert!(slices[0].endpoints.is_empty());
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    assert_eq!(
        fake.list::<EndpointSlice>().len(),
        1,
        "the placeholder is kept"
    );
    // A pod arrives: the placeholder makes way for a real slice.
    fake.insert(&pod("web-1", "10.0.0.1", true));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 1);
    assert_eq!(endpoints_of(&slices).len(), 1);
    // The selector goes: so do this controller's slices.
    fake.insert(&service("web", json!({"clusterIP": "10.96.0.10"})));
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    assert!(fake.list::<EndpointSlice>().is_empty());
}

#[tokio::test]
async fn dual_stack_services_get_a_slice_per_family() {
    let fake = FakeApi::new();
    let h = harness(&fake, 100).await;
    fake.insert(&service(
        "web",
        json!({"clusterIP": "10.96.0.10", "ipFamilies": ["IPv4", "IPv6"],
        "selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP"}]}),
    ));
    let mut dual = pod("web-1", "10.0.0.1", true);
    dual.status.as_mut().unwrap().pod_ips = Some(vec![
        object(json!({"ip": "10.0.0.1"})),
        object(json!({"ip": "fd00::1"})),
    ]);
    fake.insert(&dual);
    h.caught_up(&fake).await;
    h.syncer.sync("default/web").await.unwrap();
    let mut types: Vec<String> = fake
        .list::<EndpointSlice>()
        .into_iter()
        .map(|s| s.address_type)
        .collect();
    types.sort();
    assert_eq!(types, ["IPv4", "IPv6"]);
}
