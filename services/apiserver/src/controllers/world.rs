//! One pass's view of every object, from the resource actors' caches,
//! indexed the way the controllers ask: by uid, and owner to dependents.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::ApiError;
use crate::object::meta;
use crate::object::patch::PatchType;
use crate::registry::actor;
use crate::registry::catalog::Entry;
use crate::registry::flow::Part;
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::registry::Catalog;

/// An object and the catalog entry (resource type) it belongs to.
#[derive(Clone)]
pub struct Node {
    pub entry: Entry,
    pub object: Arc<Value>,
}

impl Node {
    pub fn uid(&self) -> &str {
        self.object["metadata"]["uid"].as_str().unwrap_or("")
    }

    pub fn deleting(&self) -> bool {
        !self.object["metadata"]["deletionTimestamp"].is_null()
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers().iter().any(|f| f == finalizer)
    }

    pub fn finalizers(&self) -> Vec<String> {
        let list = self.object["metadata"]["finalizers"].as_array();
        list.into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect()
    }

    pub fn owner_refs(&self) -> &[Value] {
        let refs = self.object["metadata"]["ownerReferences"].as_array();
        refs.map(Vec::as_slice).unwrap_or_default()
    }
}

pub struct World {
    pub nodes: Vec<Node>,
    by_uid: HashMap<String, usize>,
    dependents: HashMap<String, Vec<usize>>,
}

impl World {
    pub async fn observe(catalog: &Catalog) -> World {
        let mut nodes = Vec::new();
        // Custom types too: their objects have owners and namespaces.
        // One entry per type: a type served in several versions has one
        // set of objects.
        for entry in catalog.primary_entries() {
            let objects = entry.actor.send(actor::Snapshot).await.unwrap_or_default();
            nodes.extend(objects.into_iter().map(|object| Node {
                entry: entry.clone(),
                object,
            }));
        }
        let mut by_uid = HashMap::new();
        let mut dependents: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            by_uid.insert(node.uid().to_string(), i);
            for owner in node.owner_refs() {
                if let Some(uid) = owner["uid"].as_str() {
                    dependents.entry(uid.to_string()).or_default().push(i);
                }
            }
        }
        World {
            nodes,
            by_uid,
            dependents,
        }
    }

    pub fn by_uid(&self, uid: &str) -> Option<&Node> {
        self.by_uid.get(uid).map(|i| &self.nodes[*i])
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
        namespace: meta::namespace(&node.object).to_string(),
        name: meta::name(&node.object).to_string(),
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
    let rv = meta::resource_version(&node.object);
    let message = actor::Patch {
        namespace: meta::namespace(&node.object).to_string(),
        name: meta::name(&node.object).to_string(),
        part: Part::Main,
        kind: PatchType::Merge,
        patch: json!({"metadata": {field: value, "resourceVersion": rv}}),
        options: WriteOptions::by(super::MANAGER),
    };
    report("update", node, entry.actor.send(message).await);
}

/// Conflicts and NotFound mean someone else got there first.
fn report<T>(what: &str, node: &Node, result: Result<Result<T, ApiError>, actix::MailboxError>) {
    let name = meta::name(&node.object);
    match result {
        Ok(Ok(_)) => tracing::debug!(%name, what, "controller write"),
        Ok(Err(ApiError::NotFound(_) | ApiError::Conflict(..))) => {}
        Ok(Err(err)) => tracing::warn!(%name, what, %err, "controller write failed"),
        Err(err) => tracing::warn!(%name, what, %err, "resource actor unavailable"),
    }
}
