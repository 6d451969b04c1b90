//! An event recorder writing core/v1 Events (what `kubectl describe`
//! shows), with client-go's correlator: identical events become one
//! Event whose `count` and `lastTimestamp` grow (a PATCH, not a new
//! object); similar ones past ten in ten minutes are combined; a
//! per-object spam filter holds down floods.
//!
//! Recording never blocks: events go into a bounded buffer that one
//! writer task drains; when the buffer is full the event is dropped (and
//! counted), as client-go's broadcaster drops.
//!
//! ```no_run
//! # async fn doc(client: kube::Client, pod: k8s_openapi::api::core::v1::Pod) {
//! use capstan_client::events::{EventRecorder, EventType};
//!
//! let recorder = EventRecorder::new(client, "default-scheduler", None);
//! recorder.record(&pod, EventType::Normal, "Scheduled", "Successfully assigned default/web-1 to node-1");
//! # }
//! ```

mod correlator;
mod metrics;
mod writer;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use kube::api::ObjectMeta;
use kube::Resource;
use tokio::sync::mpsc;

pub use correlator::{Correlated, Correlator, AGGREGATE_WINDOW, COMBINED_PREFIX, MAX_SIMILAR};

/// Events buffered before new ones are dropped (client-go's queue length).
pub const BUFFER: usize = 1000;
/// Longest message kept; longer ones are cut (and marked) so one event
/// cannot hold unbounded memory in the buffer and the correlator.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// An event's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something the user may need to act on.
    Warning,
}

impl EventType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records events for one component. Clones share the buffer and writer.
#[derive(Clone)]
pub struct EventRecorder {
    sender: mpsc::Sender<Event>,
    source: Arc<EventSource>,
}

impl EventRecorder {
    /// A recorder writing through `client` as `component`
    /// (`source.component` and `reportingComponent`), on `host` if given
    /// (`source.host`, `reportingInstance`: a node's name for a kubelet).
    /// Starts the writer task: call inside a tokio runtime.
    pub fn new(client: kube::Client, component: &str, host: Option<&str>) -> EventRecorder {
        let (sender, receiver) = mpsc::channel(BUFFER);
        tokio::spawn(writer::run(client, receiver));
        EventRecorder {
            sender,
            source: Arc::new(EventSource {
                component: Some(component.to_string()),
                host: host.map(str::to_string),
            }),
        }
    }

    /// Records an event about `object`.
    pub fn record<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.record_for(reference_of(object), event_type, reason, message);
    }

    /// Records an event about the object `reference` points to.
    pub fn record_for(
        &self,
        reference: ObjectReference,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let event = self.make(reference, event_type, reason, message.into());
        if self.sender.try_send(event).is_err() {
            metrics::dropped();
            tracing::debug!(reason, "event buffer full; event dropped");
        }
    }

    fn make(
        &self,
        reference: ObjectReference,
        event_type: EventType,
        reason: &str,
        message: String,
    ) -> Event {
        let now = Utc::now();
        let namespace = reference
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let name = format!(
            "{}.{:x}",
            reference.name.as_deref().unwrap_or_default(),
            now.timestamp_nanos_opt().unwrap_or_default()
        );
        Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: reference,
            reason: Some(reason.to_string()),
            message: Some(truncate(message)),
            type_: Some(event_type.as_str().to_string()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            source: Some((*self.source).clone()),
            reporting_component: self.source.component.clone(),
            reporting_instance: self.source.host.clone(),
            ..Event::default()
        }
    }
}

/// A reference to `object` for an event's `involvedObject`.
pub fn reference_of<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

fn truncate(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    message
}

#[cfg(test)]
mod tests;
