use std::sync::Arc;

use capstan_client::informer::Informers;
use capstan_client::testing::FakeApi;
use k8s_openapi::api::core::v1::{Endpoints, Event, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::sync::Syncer;
use super::{CONTROLLER_NAME, SKIP_MIRROR};
use crate::context::{Context, Reconciler};
use crate::controllers::endpoints::tests::{service, web_service};
use crate::controllers::endpointslice::tracker::Tracker;
use crate::controllers::endpointslice::{service_key, BY_SERVICE, MANAGED_BY, SERVICE_NAME};
use crate::testkit::{context, eventually, object};

struct Harness {
    _ctx: Arc<Context>,
    informers: Informers,
    syncer: Syncer,
}

async fn harness(fake: &FakeApi) -> Harness {
    let ctx = context(fake);
    let slices = ctx.informers.get::<EndpointSlice>();
    slices.add_index(BY_SERVICE, service_key);
    let services = ctx.informers.get::<Service>();
    let endpoints = ctx.informers.get::<Endpoints>();
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        services: services.store(),
        endpoints: endpoints.store(),
        slices: slices.store(),
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
        tracker: Arc::new(Tracker::default()),
    };
    Harness {
        informers: ctx.informers.clone(),
        _ctx: ctx,
        syncer,
    }
}

/// The sorted resourceVersions of `objects`.
fn versions<K: kube::Resource>(objects: impl IntoIterator<Item = impl AsRef<K>>) -> Vec<String> {
    let mut list: Vec<String> = objects
        .into_iter()
        .map(|o| {
            o.as_ref()
                .meta()
                .resource_version
                .clone()
                .unwrap_or_default()
        })
        .collect();
    list.sort();
    list
}

impl Harness {
    /// Waits until the caches hold exactly what the API holds.
    async fn caught_up(&self, fake: &FakeApi) {
        let informers = &self.informers;
        eventually("the caches to catch up", || async {
            let slices = informers.get::<EndpointSlice>().store().list();
            let endpoints = informers.get::<Endpoints>().store().list();
            let same = informers.get::<Service>().store().len() == fake.list::<Service>().len()
                && versions::<Endpoints>(endpoints)
                    == versions::<Endpoints>(fake.list::<Endpoints>().into_iter().map(Box::new))
                && versions::<EndpointSlice>(slices.clone())
                    == versions::<EndpointSlice>(
                        fake.list::<EndpointSlice>().into_iter().map(Box::new),
                    );
            same.then_some(())
        })
        .await;
        for slice in informers.get::<EndpointSlice>().store().list() {
            for owner in service_key(&slice) {
                self.syncer.tracker.observe(&owner, &slice, false);
            }
        }
    }
}

fn hand_written(addresses: serde_json::Value) -> Endpoints {
    object(json!({
        "metadata": {"name": "db", "namespace": "default", "labels": {"tier": "data"},
            "annotations": {"note": "by hand"}},
        "subsets": [{"addresses": addresses, "ports": [{"name": "pg", "port": 5432}]}],
    }))
}

#[tokio::test]
async fn hand_written_endpoints_of_a_selectorless_service_are_mirrored() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&service(
        "db",
        json!({"clusterIP": "10.96.0.20", "ports": [{"port": 5432}]}),
    ));
    let endpoints = fake.insert(&hand_written(
        json!([{"ip": "192.168.0.1"}, {"ip": "192.168.0.2"}]),
    ));
    h.caught_up(&fake).await;
    h.syncer.sync("default/db").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(labels[SERVICE_NAME], "db");
    assert_eq!(labels[MANAGED_BY], CONTROLLER_NAME);
    assert_eq!(labels["tier"], "data");
    assert_eq!(
        slice.metadata.annotations.clone().unwrap()["note"],
        "by hand"
    );
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Endpoints", endpoints.metadata.uid.as_deref().unwrap())
    );
    let addresses: Vec<&str> = slice
        .endpoints
        .iter()
        .map(|e| e.addresses[0].as_str())
        .collect();
    assert_eq!(addresses, ["192.168.0.1", "192.168.0.2"]);
    assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(5432));

    // Changes follow; the skip-mirror label takes the mirror away.
    fake.insert(&hand_written(json!([{"ip": "192.168.0.3"}])));
    h.caught_up(&fake).await;
    h.syncer.sync("default/db").await.unwrap();
    let slices = fake.list::<EndpointSlice>();
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].endpoints[0].addresses, ["192.168.0.3"]);
    let mut skipped = hand_written(json!([{"ip": "192.168.0.3"}]));
    skipped
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(SKIP_MIRROR.into(), "true".into());
    fake.insert(&skipped);
    h.caught_up(&fake).await;
    h.syncer.sync("default/db").await.unwrap();
    assert!(fake.list::<EndpointSlice>().is_empty());
}

#[tokio::test]
async fn endpoints_of_a_service_with_a_selector_are_not_mirrored() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    let mut web = web_service();
    web.metadata.name = Some("db".into());
    fake.insert(&web);
    fake.insert(&hand_written(json!([{"ip": "192.168.0.1"}])));
    h.caught_up(&fake).await;
    h.syncer.sync("default/db").await.unwrap();
    assert!(fake.list::<EndpointSlice>().is_empty());
    // Without any Service, nothing either.
    h.syncer.sync("default/nothing").await.unwrap();
    assert!(fake.list::<EndpointSlice>().is_empty());
}

#[tokio::test]
async fn invalid_addresses_are_skipped_with_an_event() {
    let fake = FakeApi::new();
    let h = harness(&fake).await;
    fake.insert(&service("db", json!({"clusterIP": "10.96.0.20"})));
    fake.insert(&hand_written(
        json!([{"ip": "192.168.0.1"}, {"ip": "nonsense"}]),
    ));
    h.caught_up(&fake).await;
    h.syncer.sync("default/db").await.unwrap();
    assert_eq!(fake.list::<EndpointSlice>()[0].endpoints.len(), 1);
    let event = eventually("the event", || async {
        fake.list::<Event>().into_iter().next()
    })
    .await;
    assert_eq!(event.reason.as_deref(), Some("InvalidIPAddress"));
    assert_eq!(
        event.message.as_deref(),
        Some("Skipped 1 invalid IP addresses when mirroring to EndpointSlices")
    );
}
