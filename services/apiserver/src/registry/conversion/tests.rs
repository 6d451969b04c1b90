//! The conversion step on the in-memory storage: one CRD-like type
//! stored as v2 (`spec.count`) and served as v1 (`spec.size`) too, each
//! version with its own schema, through the generic flow.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt;
use serde_json::{json, Value};

use super::{Conversion, ConversionError, Converted, Converter};
use crate::admission::plugins::testing::Memory;
use crate::error::ApiError;
use crate::registry::flow::{self, Handle, Part};
use crate::registry::kinds::custom::Custom;
use crate::registry::options::{ListOptions, WriteOptions};
use crate::registry::Strategy;
use crate::storage::{Interface, MemoryStorage};

/// Renames `spec.size` (v1) to `spec.count` (v2) and back; refuses when
/// `fail` is set.
struct Rename {
    fail: bool,
}

impl Converter for Rename {
    fn convert<'a>(
        &'a self,
        objects: Vec<Value>,
        api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ConversionError>> {
        let (from, to) = match api_version {
            "example.com/v2" => ("size", "count"),
            _ => ("count", "size"),
        };
        let converted = objects.into_iter().map(|mut o| {
            if let Some(value) = o["spec"].as_object_mut().and_then(|s| s.remove(from)) {
                o["spec"][to] = value;
            }
            o["apiVersion"] = api_version.into();
            o
        });
        let result = match self.fail {
            true => Err(ConversionError(
                "conversion webhook for example.com/v1, Kind=Widget failed: down".into(),
            )),
            false => Ok(converted.collect()),
        };
        Box::pin(async move { result })
    }
}

fn strategies() -> (Vec<Arc<dyn Strategy>>, Conversion) {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "integer", "maximum": 5}}}}}})
    };
    let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
        "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": false, "schema": schema("size")},
                     {"name": "v2", "served": true, "storage": true, "schema": schema("count")}]}});
    let crd = serde_json::from_value(crd).unwrap();
    Custom::versions(&crd, Arc::new(Memory::default())).unwrap()
}

/// The handles of v1 and v2 over `store`, converting with `converter`.
fn handles(store: Arc<dyn Interface>, converter: Arc<dyn Converter>) -> (Handle, Handle) {
    let (versions, conversion) = strategies();
    assert_eq!(conversion.storage_version, "v2");
    let handle = |strategy: &Arc<dyn Strategy>| {
        let view = Converted::new(
            store.clone(),
            converter.clone(),
            strategy.def().api_version(),
            "example.com/v2".into(),
            &[],
        );
        Handle {
            strategy: strategy.clone(),
            store: Arc::new(view),
            prefix: "/registry/example.com".into(),
            namespace_contents: Default::default(),
            expiry: None,
            admission: Arc::new(crate::admission::Chain::default()),
        }
    };
    (handle(&versions[0]), handle(&versions[1]))
}

fn widget(version: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget",
           "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn written_in_one_version_stored_in_the_storage_version_read_in_any() {
    let store: Arc<dyn Interface> = Arc::new(MemoryStorage::new());
    let (v1, v2) = handles(store.clone(), Arc::new(Rename { fail: false }));
    let options = WriteOptions::default();
    // Validated against the request version's schema.
    let bad = flow::create(
        &v1,
        "",
        widget("v1", "a", json!({"size": 9})),
        options.clone(),
    )
    .await;
    assert!(matches!(bad, Err(ApiError::Invalid(_))), "{bad:?}");
    let reply = flow::create(
        &v1,
        "",
        widget("v1", "a", json!({"size": 2})),
        options.clone(),
    );
    let reply = reply.await.unwrap();
    assert_eq!(reply.body["apiVersion"], "example.com/v1");
    assert_eq!(reply.body["spec"], json!({"size": 2}));
    let raw = store
        .get("/registry/example.com/widgets/a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw.object["apiVersion"], "example.com/v2");
    assert_eq!(raw.object["spec"], json!({"count": 2}));
    let read = flow::get(&v2, "", "a", Part::Main).await.unwrap();
    assert_eq!(
        (read["apiVersion"].as_str(), &read["spec"]),
        (Some("example.com/v2"), &json!({"count": 2}))
    );
    // An update in v2 is read back in v1.
    let mut changed = read.clone();
    changed["spec"]["count"] = 3.into();
    flow::update(&v2, "", "a", Part::Main, changed, options.clone())
        .await
        .unwrap();
    let read = flow::get(&v1, "", "a", Part::Main).await.unwrap();
    assert_eq!(read["spec"], json!({"size": 3}));
    assert_eq!(
        read["metadata"]["resourceVersion"],
        raw.mod_revision.checked_add(1).unwrap().to_string()
    );
}

#[tokio::test]
async fn lists_and_watches_are_converted_and_old_objects_stay_readable() {
    let store: Arc<dyn Interface> = Arc::new(MemoryStorage::new());
    let (v1, v2) = handles(store.clone(), Arc::new(Rename { fail: false }));
    // Stored before the storage version moved to v2.
    let old = widget("v1", "old", json!({"size": 1}));
    store
        .create("/registry/example.com/widgets/old", &old, None)
        .await
        .unwrap();
    let from = store.current_revision().await.unwrap() + 1;
    let mut events = v1
        .store
        .watch("/registry/example.com/widgets/", from)
        .await
        .unwrap();
    flow::create(
        &v2,
        "",
        widget("v2", "new", json!({"count": 4})),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    for (handle, field) in [(&v1, "size"), (&v2, "count")] {
        let page = flow::list(handle, None, ListOptions::default())
            .await
            .unwrap();
        let items: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
        assert_eq!(items.len(), 2);
        for item in &items {
            assert_eq!(item["apiVersion"], handle.strategy.def().api_version());
            assert!(item["spec"][field].is_i64(), "{item}");
        }
    }
    let batch = events.next().await.unwrap().unwrap();
    let object = &batch[0].object.as_ref().unwrap().object;
    assert_eq!(
        (object["apiVersion"].as_str(), &object["spec"]),
        (Some("example.com/v1"), &json!({"size": 4}))
    );
}

#[tokio::test]
async fn a_failed_conversion_refuses_the_write_and_stores_nothing() {
    let store: Arc<dyn Interface> = Arc::new(MemoryStorage::new());
    let (v1, v2) = handles(store.clone(), Arc::new(Rename { fail: true }));
    let refused = flow::create(
        &v1,
        "",
        widget("v1", "a", json!({"size": 2})),
        WriteOptions::default(),
    )
    .await;
    let Err(err) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(err.code(), 500);
    assert!(
        err.to_string()
            .contains("conversion webhook for example.com/v1, Kind=Widget failed"),
        "{err}"
    );
    assert_eq!(
        store.count("/registry/example.com/widgets/").await.unwrap(),
        0
    );
    // The storage version itself needs no conversion.
    flow::create(
        &v2,
        "",
        widget("v2", "b", json!({"count": 2})),
        WriteOptions::default(),
    )
    .await
    .unwrap();
    let read = flow::get(&v1, "", "b", Part::Main).await;
    assert_eq!(read.unwrap_err().code(), 500);
}
