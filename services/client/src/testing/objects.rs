//! The in-memory API's storage: objects as JSON by (group, resource) and
//! `namespace/name`, one global resourceVersion counter, and a bounded
//! history of changes that watches are served from.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::selectors::Selectors;

/// (group, plural resource): versions of one resource share objects.
pub(super) type Collection = (String, String);

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug)]
pub(super) struct Change {
    pub resource_version: u64,
    pub collection: Collection,
    pub change: ChangeType,
    /// The object before (for selector transitions).
    pub old: Option<Value>,
    /// The object after (the final state for a deletion).
    pub object: Value,
}

/// Changes kept for watches to resume from by default.
pub(super) const HISTORY: usize = 10_000;

pub(super) struct Objects {
    resource_version: u64,
    collections: HashMap<Collection, BTreeMap<String, Value>>,
    history: VecDeque<Arc<Change>>,
    /// Changes at or below this version are no longer in the history.
    compacted: u64,
    history_limit: usize,
}

/// `namespace/name`, or `name` when cluster-scoped.
pub(super) fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

impl Objects {
    pub(super) fn new() -> Objects {
        Objects {
            resource_version: 1,
            collections: HashMap::new(),
            history: VecDeque::new(),
            compacted: 1,
            history_limit: HISTORY,
        }
    }

    pub(super) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub(super) fn get(&self, collection: &Collection, key: &str) -> Option<&Value> {
        self.collections.get(collection)?.get(key)
    }

    /// The `kind` stored objects of `collection` carry ("" if none).
    pub(super) fn kind(&self, collection: &Collection) -> String {
        self.collections
            .get(collection)
            .and_then(|objects| objects.values().next())
            .and_then(|o| o["kind"].as_str())
            .unwrap_or_default()
            .to_string()
    }

    /// Objects in `namespace` (all when `None`) that match `selectors`.
    pub(super) fn list(
        &self,
        collection: &Collection,
        namespace: Option<&str>,
        selectors: &Selectors,
    ) -> Vec<Value> {
        let Some(objects) = self.collections.get(collection) else {
            return Vec::new();
        };
        objects
            .values()
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns)))
            .filter(|o| selectors.matches(o))
            .cloned()
            .collect()
    }

    /// Stores `object` at `key` with the next resourceVersion; the change.
    pub(super) fn put(
        &mut self,
        collection: &Collection,
        key: &str,
        mut object: Value,
        change: ChangeType,
    ) -> Arc<Change> {
        self.resource_version += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.resource_version.to_string());
        let old = self
            .collections
            .entry(collection.clone())
            .or_default()
            .insert(key.to_string(), object.clone());
        self.record(collection, change, old, object)
    }

    /// Removes the object at `key`; the change (its final state carries
    /// the deletion's resourceVersion, as kube's DELETED events do).
    pub(super) fn remove(&mut self, collection: &Collection, key: &str) -> Option<Arc<Change>> {
        let mut object = self.collections.get_mut(collection)?.remove(key)?;
        self.resource_version += 1;
        let old = object.clone();
        object["metadata"]["resourceVersion"] = Value::String(self.resource_version.to_string());
        Some(self.record(collection, ChangeType::Deleted, Some(old), object))
    }

    fn record(
        &mut self,
        collection: &Collection,
        change: ChangeType,
        old: Option<Value>,
        object: Value,
    ) -> Arc<Change> {
        let change = Arc::new(Change {
            resource_version: self.resource_version,
            collection: collection.clone(),
            change,
            old,
            object,
        });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.resource_version;
            }
        }
        change
    }

    /// The changes to `collection` after `since`, or `Err(oldest)` if
    /// some of them are no longer kept.
    pub(super) fn changes_since(
        &self,
        collection: &Collection,
        since: u64,
    ) -> Result<Vec<Arc<Change>>, u64> {
        if since < self.compacted {
            return Err(self.compacted + 1);
        }
        Ok(self
            .history
            .iter()
            .filter(|c| c.resource_version > since && &c.collection == collection)
            .cloned()
            .collect())
    }

    /// Forgets the history: watches from any version before now get 410.
    pub(super) fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.resource_version;
    }
}
