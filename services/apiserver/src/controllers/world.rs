//! One pass's view of the objects the controllers act on, from the
//! resource actors' caches: those that finalizers, owner references or a
//! deletion hold (the rest have nothing for a controller to do), indexed
//! owner to dependents, and the owners those refer to, by uid.
//!
//! A pass runs every couple of seconds over every cached object, so it
//! neither copies nor parses the objects it skips: a pass that parsed
//! everything cost a full parse of the cache each time, and the garbage
//! it left was most of the API server's resident memory per object.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::registry::actor;
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::registry::Catalog;
use crate::storage::Object;

/// Who the controllers' writes are from, in managedFields.
pub const MANAGER: &str = "capstan-controllers";

/// An object and the catalog entry (resource type) it belongs to.
#[derive(Clone)]
pub struct Node {
    pub entry: Entry,
    pub object: Arc<Object>,
    /// What the controllers read of a held object's metadata, as
    /// `{"metadata": {...}}`; null for an object nothing holds.
    view: Value,
}

/// The metadata fields the controllers read; the rest of the object is
/// skipped by the parser, not built.
#[derive(Deserialize)]
struct Envelope {
    metadata: HeldMetadata,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeldMetadata {
    #[serde(default)]
    finalizers: Value,
    #[serde(default)]
    owner_references: Value,
    #[serde(default)]
    deletion_timestamp: Value,
    #[serde(default)]
    deletion_grace_period_seconds: Value,
}

impl Node {
    fn new(entry: Entry, object: Arc<Object>) -> Node {
        let view = match object.held() {
            true => held_view(&object),
            false => Value::Null,
        };
        Node {
            entry,
            object,
            view,
        }
    }

    pub fn uid(&self) -> &str {
        self.object.uid()
    }

    /// The held metadata as `{"metadata": {...}}` (null when not held).
    pub fn view(&self) -> &Value {
        &self.view
    }

    pub fn deleting(&self) -> bool {
        !self.view["metadata"]["deletionTimestamp"].is_null()
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers().iter().any(|f| f == finalizer)
    }

    pub fn finalizers(&self) -> Vec<String> {
        let list = self.view["metadata"]["finalizers"].as_array();
        list.into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect()
    }

    pub fn owner_refs(&self) -> &[Value] {
        let refs = self.view["metadata"]["ownerReferences"].as_array();
        refs.map(Vec::as_slice).unwrap_or_default()
    }
}

/// A held object's controller metadata; an object that does not parse
/// (it did once, as the cache holds it) counts as holding nothing.
fn held_view(object: &Object) -> Value {
    match serde_json::from_str::<Envelope>(object.json().get()) {
        Ok(Envelope { metadata: m }) => json!({"metadata": {
            "finalizers": m.finalizers,
            "ownerReferences": m.owner_references,
            "deletionTimestamp": m.deletion_timestamp,
            "deletionGracePeriodSeconds": m.deletion_grace_period_seconds,
        }}),
        Err(_) => Value::Null,
    }
}

pub struct World {
    /// The held objects: the only ones a controller acts on.
    pub nodes: Vec<Node>,
    /// The objects the held ones name as owners, by uid.
    owners: HashMap<String, Node>,
    dependents: HashMap<String, Vec<usize>>,
}

impl World {
    pub async fn observe(catalog: &Catalog) -> World {
        // Custom types too: their objects have owners and namespaces.
        // One entry per type: a type served in several versions has one
        // set of objects.
        let mut snapshots = Vec::new();
        for entry in catalog.primary_entries() {
            let objects = entry.actor.send(actor::Snapshot).await.unwrap_or_default();
            snapshots.push((entry, objects));
        }
        let nodes: Vec<Node> = snapshots
            .iter()
            .flat_map(|(entry, objects)| {
                let held = objects.iter().filter(|o| o.held());
                held.map(|o| Node::new(entry.clone(), o.clone()))
            })
            .collect();
        let mut dependents: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            for owner in node.owner_refs() {
                if let Some(uid) = owner["uid"].as_str() {
                    dependents.entry(uid.to_string()).or_default().push(i);
                }
            }
        }
        let owners = find_owners(&snapshots, &dependents);
        World {
            nodes,
            owners,
            dependents,
        }
    }

    pub fn by_uid(&self, uid: &str) -> Option<&Node> {
        self.owners.get(uid)
    }

    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &Node> {
        let list = self
            .dependents
            .get(uid)
            .map(Vec::as_slice)
            .unwrap_or_default();
        list.iter().map(|i| &self.nodes[*i])
    }
}

/// The cached objects whose uids some held object names as its owner.
fn find_owners(
    snapshots: &[(Entry, Vec<Arc<Object>>)],
    dependents: &HashMap<String, Vec<usize>>,
) -> HashMap<String, Node> {
    let wanted: HashSet<&str> = dependents.keys().map(String::as_str).collect();
    let mut owners = HashMap::new();
    if wanted.is_empty() {
        return owners;
    }
    for (entry, objects) in snapshots {
        for object in objects.iter().filter(|o| wanted.contains(o.uid())) {
            let node = Node::new(entry.clone(), object.clone());
            owners.insert(object.uid().to_string(), node);
        }
    }
    owners
}

/// The catalog entry (built-in or custom) serving `apiVersion` + `kind`.
pub fn entry_for_kind(catalog: &Catalog, api_version: &str, kind: &str) -> Option<Entry> {
    catalog.all_entries().into_iter().find(|e| {
        let def = e.strategy.def();
        def.kind == kind && def.api_version() == api_version
    })
}

/// Deletes `node` if it is still the object with its uid.
pub async fn delete(node: &Node, options: DeleteOptions) {
    let entry = &node.entry;
    let message = actor::Delete {
        namespace: node.object.namespace().to_string(),
        name: node.object.name().to_string(),
        options: DeleteOptions {
            uid: Some(node.uid().to_string()),
            ..options
        },
    };
    report("delete", node, entry.actor.send(message).await);
}

/// Sets metadata `field` of `node` to `value`, if `node` is unchanged.
/// An empty list goes altogether, as Kubernetes' omitempty leaves it.
pub async fn set_metadata(node: &Node, field: &str, value: Value) {
    let value = match value {
        Value::Array(list) if list.is_empty() => Value::Null,
        other => other,
    };
    let entry = &node.entry;
    let rv = node.object.revision().to_string();
    let message = actor::Patch {
        namespace: node.object.namespace().to_string(),
        name: node.object.name().to_string(),
        part: Part::Main,
        kind: PatchType::Merge,
        patch: json!({"metadata": {field: value, "resourceVersion": rv}}),
        options: WriteOptions::by(MANAGER),
    };
    report("update", node, entry.actor.send(message).await);
}

/// Conflicts and NotFound mean someone else got there first.
fn report<T>(what: &str, node: &Node, result: Result<Result<T, ApiError>, actix::MailboxError>) {
    let name = node.object.name();
    match result {
        Ok(Ok(_)) => tracing::debug!(%name, what, "controller write"),
        Ok(Err(ApiError::NotFound(_) | ApiError::Conflict(..))) => {}
        Ok(Err(err)) => tracing::warn!(%name, what, %err, "controller write failed"),
        Err(err) => tracing::warn!(%name, what, %err, "resource actor unavailable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(metadata: Value) -> Object {
        let mut value = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"x": [1, 2]}});
        value["metadata"] = metadata;
        Object::new("/registry/pods/ns/p", value, 7, &[])
    }

    #[test]
    fn a_held_object_shows_its_controller_metadata_only() {
        let held = object(json!({"name": "p", "uid": "u1", "finalizers": ["f"],
            "ownerReferences": [{"uid": "u0"}], "deletionTimestamp": "2026-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 30, "labels": {"a": "b"}}));
        let view = held_view(&held);
        assert_eq!(view["metadata"]["finalizers"], json!(["f"]));
        assert_eq!(view["metadata"]["ownerReferences"], json!([{"uid": "u0"}]));
        assert_eq!(view["metadata"]["deletionGracePeriodSeconds"], json!(30));
        assert!(view["metadata"]["labels"].is_null());
        assert!(view["spec"].is_null());
    }

    #[test]
    fn missing_fields_read_as_null() {
        let view = held_view(&object(json!({"name": "p", "finalizers": ["f"]})));
        assert!(view["metadata"]["deletionTimestamp"].is_null());
        assert!(view["metadata"]["ownerReferences"].is_null());
    }
}
