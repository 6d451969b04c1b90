//! A custom type through the generic flow on the in-memory storage:
//! pruned, defaulted, validated, and its `/status` kept apart.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::ApiError;
use crate::registry::flow::{self, Handle, Part};
use crate::registry::kinds::custom::Custom;
use crate::registry::options::WriteOptions;
use crate::storage::MemoryStorage;

fn handle() -> Handle {
    let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
        "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "required": ["size"], "properties": {
                    "size": {"type": "integer", "maximum": 5}, "color": {"type": "string", "default": "blue"}}},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}});
    let crd = serde_json::from_value(crd).unwrap();
    Handle {
        strategy: Arc::new(Custom::of(&crd).unwrap()),
        store: Arc::new(MemoryStorage::new()),
        prefix: "/registry/example.com".into(),
        namespace_contents: Default::default(),
        expiry: None,
        admission: Arc::new(crate::admission::Chain::default()),
    }
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

#[tokio::test]
async fn created_objects_are_pruned_defaulted_and_validated() {
    let h = handle();
    let options = WriteOptions::default();
    let bad = flow::create(&h, "", widget(json!({"size": 9})), options.clone()).await;
    let Err(ApiError::Invalid(invalid)) = bad else {
        panic!("{bad:?}")
    };
    assert_eq!(invalid.causes[0].field, "spec.size");
    let reply = flow::create(
        &h,
        "",
        widget(json!({"size": 2, "junk": 1})),
        options.clone(),
    )
    .await
    .unwrap();
    assert_eq!(reply.body["spec"], json!({"size": 2, "color": "blue"}));
    let stored = h.read("", "w").await.unwrap();
    assert_eq!(stored.object["spec"], json!({"size": 2, "color": "blue"}));
    assert!(stored.object.get("status").is_none());

    let mut status = reply.body.clone();
    status["status"] = json!({"ready": true});
    status["spec"]["size"] = json!(3);
    let written = flow::update(&h, "", "w", Part::Status, status, options)
        .await
        .unwrap();
    assert_eq!(written.body["status"]["ready"], true);
    assert_eq!(
        written.body["spec"]["size"], 2,
        "spec changes only through the main resource"
    );
    assert_eq!(written.body["metadata"]["generation"], 1);
}

#[test]
fn versions_not_served_are_left_out_but_the_storage_version_is_kept() {
    let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
        "scope": "Cluster", "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": false, "storage": false},
                     {"name": "v2", "served": true, "storage": false},
                     {"name": "v3", "served": true, "storage": true}]}});
    let mut stored_only = crd.clone();
    stored_only["spec"]["versions"][2]["served"] = false.into();
    let crd = serde_json::from_value(crd).unwrap();
    let objects = Arc::new(crate::admission::plugins::testing::Memory::default());
    let (versions, conversion) = Custom::versions(&crd, objects).unwrap();
    let names: Vec<(&str, bool)> = versions
        .iter()
        .map(|s| (s.def().version, s.served()))
        .collect();
    assert_eq!(names, [("v2", true), ("v3", true)]);
    assert_eq!(conversion.storage_version, "v3");
    // A storage version not served still stores, but is not served.
    let stored_only = serde_json::from_value(stored_only).unwrap();
    let objects = Arc::new(crate::admission::plugins::testing::Memory::default());
    let (versions, _) = Custom::versions(&stored_only, objects).unwrap();
    let served: Vec<bool> = versions.iter().map(|s| s.served()).collect();
    assert_eq!(served, [true, false]);
}
