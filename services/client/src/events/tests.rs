//! The recorder against the in-memory API.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::json;

use super::*;
use crate::testing::{ApiError, FakeApi, Verb};

fn pod() -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"}}),
    )
    .unwrap()
}

async fn settle() {
    // The writer runs on its own task; with time paused this lets it drain.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test(start_paused = true)]
async fn an_event_repeated_is_one_object_whose_count_grows_by_patches() {
    let fake = FakeApi::new();
    let recorder = EventRecorder::new(fake.client(), "default-scheduler", None);
    for _ in 0..3 {
        recorder.record(
            &pod(),
            EventType::Warning,
            "FailedScheduling",
            "0/3 nodes are available",
        );
    }
    settle().await;
    let events = fake.list::<Event>();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.count, Some(3));
    assert_eq!(event.metadata.namespace.as_deref(), Some("shop"));
    assert!(event
        .metadata
        .name
        .as_deref()
        .unwrap()
        .starts_with("web-1."));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(event.involved_object.uid.as_deref(), Some("u-1"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(
        event.source.as_ref().unwrap().component.as_deref(),
        Some("default-scheduler")
    );
    assert_eq!(fake.calls_to(Verb::Create, "events").len(), 1);
    assert_eq!(fake.calls_to(Verb::Patch, "events").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_cluster_scoped_object_gets_its_events_in_default() {
    let fake = FakeApi::new();
    let recorder = EventRecorder::new(fake.client(), "kubelet", Some("node-1"));
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
    recorder.record(
        &node,
        EventType::Normal,
        "NodeReady",
        "Node node-1 status is now: NodeReady",
    );
    settle().await;
    let event = &fake.list::<Event>()[0];
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.reporting_instance.as_deref(), Some("node-1"));
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_is_retried_and_a_deleted_event_is_created_again() {
    let fake = FakeApi::new();
    let recorder = EventRecorder::new(fake.client(), "c", None);
    fake.fail_next(
        Verb::Create,
        "events",
        2,
        ApiError::new(503, "ServiceUnavailable", "down"),
    );
    recorder.record(&pod(), EventType::Normal, "Pulled", "pulled");
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(fake.list::<Event>().len(), 1);
    assert_eq!(fake.calls_to(Verb::Create, "events").len(), 3);

    // Someone deletes the Event; the next repeat cannot patch it: created anew.
    let name = fake.list::<Event>()[0].metadata.name.clone().unwrap();
    let api: kube::Api<Event> = kube::Api::namespaced(fake.client(), "shop");
    api.delete(&name, &Default::default()).await.unwrap();
    recorder.record(&pod(), EventType::Normal, "Pulled", "pulled");
    settle().await;
    let events = fake.list::<Event>();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].count, Some(2));
}

#[tokio::test(start_paused = true)]
async fn recording_never_blocks_when_the_api_is_down() {
    let fake = FakeApi::new();
    fake.fail_next(
        Verb::Create,
        "events",
        usize::MAX,
        ApiError::new(503, "ServiceUnavailable", "down"),
    );
    let recorder = EventRecorder::new(fake.client(), "c", None);
    let started = std::time::Instant::now();
    for i in 0..(BUFFER * 3) {
        let object: Pod = serde_json::from_value(
            json!({"metadata": {"name": format!("p{i}"), "namespace": "a"}}),
        )
        .unwrap();
        recorder.record(&object, EventType::Normal, "Tick", "tick");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "recording blocked"
    );
    assert!(crate::metrics::encode().contains("events_recorded_total{outcome=\"dropped\"}"));
}

#[test]
fn long_messages_are_cut_at_a_character_boundary() {
    let long = "é".repeat(MAX_MESSAGE_BYTES);
    let cut = truncate(long);
    assert!(cut.len() <= MAX_MESSAGE_BYTES);
    assert!(cut.ends_with("..."));
}
