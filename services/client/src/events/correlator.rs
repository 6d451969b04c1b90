//! client-go's event correlator, free of I/O: a spam filter per source
//! and object, aggregation of similar events, and de-duplication of
//! identical ones into one Event whose `count` grows.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use tokio::time::Instant;

use crate::rate::TokenBucket;

/// Similar events (same source, object, type and reason) with more than
/// this many distinct messages in the window are combined.
pub const MAX_SIMILAR: usize = 10;
/// The window in which similar events are counted.
pub const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);
/// Prefix of a combined event's message.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";
/// Entries each cache keeps (client-go's LRU size).
const CACHE_SIZE: usize = 4096;
/// Spam filter: 25 events at once per source and object, then one per 5 minutes.
const SPAM_BURST: u32 = 25;
const SPAM_QPS: f64 = 1.0 / 300.0;

/// What to write for an event.
#[derive(Debug, PartialEq)]
pub enum Correlated {
    /// A new Event object.
    Create(Event),
    /// An existing Event seen again: patch its count, last timestamp and
    /// message (the event carries the existing name).
    Patch(Event),
    /// Dropped by the spam filter.
    Drop,
}

/// A bounded map that forgets its oldest entries first.
struct Bounded<K, V> {
    entries: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get_mut_or_insert(&mut self, key: &K, make: impl FnOnce() -> V) -> &mut V {
        if !self.entries.contains_key(key) {
            if self.entries.len() >= CACHE_SIZE {
                while let Some(oldest) = self.order.pop_front() {
                    if self.entries.remove(&oldest).is_some() {
                        break;
                    }
                }
            }
            self.order.push_back(key.clone());
            self.entries.insert(key.clone(), make());
        }
        self.entries.get_mut(key).expect("inserted above")
    }

    fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key)
    }
}

struct Similar {
    messages: HashSet<String>,
    last: Instant,
}

#[derive(Clone)]
struct Logged {
    count: i32,
    first_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    name: String,
}

/// The correlator's memory.
pub struct Correlator {
    spam: Bounded<String, TokenBucket>,
    similar: Bounded<String, Similar>,
    logged: Bounded<String, Logged>,
}

impl Default for Correlator {
    fn default() -> Self {
        Correlator {
            spam: Bounded::new(),
            similar: Bounded::new(),
            logged: Bounded::new(),
        }
    }
}

impl Correlator {
    /// Decides what to write for `event` (fresh: count 1, its own name).
    pub fn correlate(&mut self, mut event: Event) -> Correlated {
        let bucket = self
            .spam
            .get_mut_or_insert(&spam_key(&event), || TokenBucket::new(SPAM_QPS, SPAM_BURST));
        if !bucket.try_take() {
            return Correlated::Drop;
        }
        let dedup_key = self.aggregate(&mut event);
        match self.logged.get(&dedup_key).cloned() {
            Some(seen) => {
                event.count = Some(seen.count + 1);
                event.first_timestamp = seen.first_timestamp;
                event.metadata.name = Some(seen.name);
                self.remember(dedup_key, &event);
                Correlated::Patch(event)
            }
            None => {
                self.remember(dedup_key, &event);
                Correlated::Create(event)
            }
        }
    }

    /// Notes what the server now holds under `key`'s event (after a
    /// create, its name may differ from the one proposed).
    fn remember(&mut self, key: String, event: &Event) {
        let entry = self.logged.get_mut_or_insert(&key, || Logged {
            count: 0,
            first_timestamp: None,
            name: String::new(),
        });
        entry.count = event.count.unwrap_or(1);
        entry.first_timestamp = event.first_timestamp.clone();
        entry.name = event.metadata.name.clone().unwrap_or_default();
    }

    /// Counts `event` among similar ones; past [`MAX_SIMILAR`] distinct
    /// messages in the window, rewrites it as the combined event. Returns
    /// its de-duplication key.
    fn aggregate(&mut self, event: &mut Event) -> String {
        let similar_key = similar_key(event);
        let message = event.message.clone().unwrap_or_default();
        let now = Instant::now();
        let record = self.similar.get_mut_or_insert(&similar_key, || Similar {
            messages: HashSet::new(),
            last: now,
        });
        if now.saturating_duration_since(record.last) > AGGREGATE_WINDOW {
            record.messages.clear();
        }
        record.last = now;
        record.messages.insert(message.clone());
        if record.messages.len() < MAX_SIMILAR {
            return format!("{similar_key}\u{0}{message}");
        }
        event.message = Some(format!("{COMBINED_PREFIX}{message}"));
        similar_key
    }
}

fn spam_key(event: &Event) -> String {
    let source = event.source.clone().unwrap_or_default();
    let o = &event.involved_object;
    [
        source.component.unwrap_or_default(),
        source.host.unwrap_or_default(),
        o.kind.clone().unwrap_or_default(),
        o.namespace.clone().unwrap_or_default(),
        o.name.clone().unwrap_or_default(),
        o.uid.clone().unwrap_or_default(),
        o.api_version.clone().unwrap_or_default(),
    ]
    .join("\u{0}")
}

fn similar_key(event: &Event) -> String {
    [
        spam_key(event),
        event.type_.clone().unwrap_or_default(),
        event.reason.clone().unwrap_or_default(),
        event.reporting_component.clone().unwrap_or_default(),
        event.reporting_instance.clone().unwrap_or_default(),
    ]
    .join("\u{0}")
}

#[cfg(test)]
#[path = "correlator_tests.rs"]
mod tests;
