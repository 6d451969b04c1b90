use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};

use super::*;

fn event(name: &str, reason: &str, message: &str) -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("{name}.{message}")),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            api_version: Some("v1".into()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some("Normal".into()),
        count: Some(1),
        source: Some(EventSource {
            component: Some("test".into()),
            host: None,
        }),
        reporting_component: Some("test".into()),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn identical_events_become_one_whose_count_grows() {
    let mut correlator = Correlator::default();
    let Correlated::Create(first) = correlator.correlate(event("p", "Started", "m")) else {
        panic!("the first is created");
    };
    let Correlated::Patch(second) = correlator.correlate(event("p", "Started", "m")) else {
        panic!("the second patches the first");
    };
    assert_eq!(second.count, Some(2));
    assert_eq!(second.metadata.name, first.metadata.name);
    let Correlated::Patch(third) = correlator.correlate(event("p", "Started", "m")) else {
        panic!("and so does the third");
    };
    assert_eq!(third.count, Some(3));
    // Another object's event is its own.
    assert!(matches!(
        correlator.correlate(event("q", "Started", "m")),
        Correlated::Create(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn similar_events_past_ten_messages_are_combined() {
    let mut correlator = Correlator::default();
    for i in 0..MAX_SIMILAR - 1 {
        let result = correlator.correlate(event("p", "Failed", &format!("m{i}")));
        assert!(matches!(result, Correlated::Create(_)), "{i}: {result:?}");
    }
    let Correlated::Create(combined) = correlator.correlate(event("p", "Failed", "m-last")) else {
        panic!("the tenth distinct message starts the combined event");
    };
    assert_eq!(
        combined.message.as_deref(),
        Some("(combined from similar events): m-last")
    );
    let Correlated::Patch(again) = correlator.correlate(event("p", "Failed", "m-next")) else {
        panic!("later similar events patch the combined one");
    };
    assert_eq!(again.count, Some(2));
    assert_eq!(again.metadata.name, combined.metadata.name);
    assert_eq!(
        again.message.as_deref(),
        Some("(combined from similar events): m-next")
    );
}

#[tokio::test(start_paused = true)]
async fn similar_messages_are_forgotten_after_the_window() {
    let mut correlator = Correlator::default();
    for i in 0..MAX_SIMILAR - 1 {
        correlator.correlate(event("p", "Failed", &format!("m{i}")));
    }
    tokio::time::advance(AGGREGATE_WINDOW + Duration::from_secs(1)).await;
    let Correlated::Create(fresh) = correlator.correlate(event("p", "Failed", "new")) else {
        panic!("a new message after the window is its own event");
    };
    assert_eq!(fresh.message.as_deref(), Some("new"));
}

#[tokio::test(start_paused = true)]
async fn the_spam_filter_allows_a_burst_per_object_then_one_per_five_minutes() {
    let mut correlator = Correlator::default();
    let mut written = 0;
    for i in 0..40 {
        if correlator.correlate(event("p", "Tick", &format!("{}", i % 3))) != Correlated::Drop {
            written += 1;
        }
    }
    assert_eq!(written, 25);
    // Other objects are not held back by p's spam.
    assert!(correlator.correlate(event("q", "Tick", "0")) != Correlated::Drop);
    tokio::time::advance(Duration::from_secs(300)).await;
    assert!(correlator.correlate(event("p", "Tick", "0")) != Correlated::Drop);
    assert_eq!(
        correlator.correlate(event("p", "Tick", "0")),
        Correlated::Drop
    );
}
