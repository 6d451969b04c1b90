//! Which events a watcher wants.

use capstan_proto::mvccpb::{event::EventType, Event};

use crate::mvcc::KeyRange;

#[derive(Debug, Clone)]
pub struct WatchFilter {
    pub range: KeyRange,
    pub no_put: bool,
    pub no_delete: bool,
    pub prev_kv: bool,
}

impl WatchFilter {
    /// The events of one revision this watcher should receive, shaped for it.
    pub fn select(&self, events: &[Event]) -> Vec<Event> {
        events
            .iter()
            .filter(|event| self.wants(event))
            .map(|event| {
                let mut event = event.clone();
                if !self.prev_kv {
                    event.prev_kv = None;
                }
                event
            })
            .collect()
    }

    fn wants(&self, event: &Event) -> bool {
        let is_put = event.r#type == EventType::Put as i32;
        if (is_put && self.no_put) || (!is_put && self.no_delete) {
            return false;
        }
        event
            .kv
            .as_ref()
            .is_some_and(|kv| self.range.contains(&kv.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_proto::mvccpb::KeyValue;

    fn event(kind: EventType, key: &str) -> Event {
        Event {
            r#type: kind as i32,
            kv: Some(KeyValue {
                key: key.into(),
                ..Default::default()
            }),
            prev_kv: Some(KeyValue::default()),
        }
    }

    #[test]
    fn filters_by_range_type_and_strips_prev() {
        let filter = WatchFilter {
            range: KeyRange::new(b"a", b"b"),
            no_put: false,
            no_delete: true,
            prev_kv: false,
        };
        let events = vec![
            event(EventType::Put, "a1"),
            event(EventType::Delete, "a2"),
            event(EventType::Put, "b"),
        ];
        // Only the put inside the range is kept, without its previous kv.
        let mut expected = event(EventType::Put, "a1");
        expected.prev_kv = None;
        assert_eq!(filter.select(&events), vec![expected]);
    }

    #[test]
    fn keeps_prev_kv_when_asked_and_filters_puts() {
        let filter = WatchFilter {
            range: KeyRange::new(b"a", b"b"),
            no_put: true,
            no_delete: false,
            prev_kv: true,
        };
        let events = vec![
            event(EventType::Put, "a1"),
            event(EventType::Delete, "a2"),
            event(EventType::Delete, "c"),
        ];
        assert_eq!(filter.select(&events), vec![event(EventType::Delete, "a2")]);
    }
}
