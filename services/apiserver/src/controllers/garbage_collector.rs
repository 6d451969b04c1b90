//! The garbage collector, as kube-controller-manager runs it, reduced to
//! its rules:
//! - an object whose owners are all gone is deleted (in the foreground
//!   when an owner is itself being deleted in the foreground);
//! - an object with some owners gone loses the references to them;
//! - an owner deleted in the foreground (`foregroundDeletion` finalizer)
//!   goes once it has no dependents left;
//! - an owner deleted with `orphan` first lets go of its dependents.
//!
//! An owner missing from the caches is looked up in the store before
//! anything is deleted for it: caches of different types trail the store
//! by different amounts.

use serde_json::Value;

use super::world::{self, entry_for_kind, Node, World};
use crate::error::ApiError;
use crate::registry::actor;
use crate::registry::flow::deletion::{FOREGROUND, ORPHAN};
use crate::registry::flow::Part;
use crate::registry::options::DeleteOptions;
use crate::registry::Catalog;

/// What one owner reference points at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Owner {
    Present,
    /// Being deleted in the foreground: its dependents go first.
    Going,
    Gone,
}

pub async fn pass(catalog: &Catalog, world: &World) {
    for node in world.nodes.iter().filter(|n| !n.owner_refs().is_empty()) {
        collect_dependent(catalog, world, node).await;
    }
    for node in world.nodes.iter().filter(|n| n.deleting()) {
        if node.has_finalizer(ORPHAN) {
            orphan_dependents(world, node).await;
        } else if node.has_finalizer(FOREGROUND) && world.dependents_of(node.uid()).next().is_none()
        {
            drop_finalizer(node, FOREGROUND).await;
        }
    }
}

async fn collect_dependent(catalog: &Catalog, world: &World, node: &Node) {
    let mut states = Vec::new();
    for reference in node.owner_refs() {
        states.push(owner_state(catalog, world, node, reference).await);
    }
    if states.contains(&Owner::Present) {
        if states.contains(&Owner::Gone) {
            let kept: Vec<Value> = node
                .owner_refs()
                .iter()
                .zip(&states)
                .filter(|(_, s)| **s != Owner::Gone)
                .map(|(r, _)| r.clone())
                .collect();
            world::set_metadata(node, "ownerReferences", kept.into()).await;
        }
        return;
    }
    if node.deleting() {
        return;
    }
    let propagation = match states.contains(&Owner::Going) {
        true => "Foreground",
        false => "Background",
    };
    let options = DeleteOptions {
        propagation: Some(propagation.into()),
        ..Default::default()
    };
    world::delete(node, options).await;
}

async fn owner_state(catalog: &Catalog, world: &World, node: &Node, reference: &Value) -> Owner {
    let uid = reference["uid"].as_str().unwrap_or("");
    if let Some(owner) = world.by_uid(uid) {
        let going = owner.deleting() && owner.has_finalizer(FOREGROUND);
        return if going { Owner::Going } else { Owner::Present };
    }
    match in_store(catalog, node, reference).await {
        Some(false) => Owner::Gone,
        // Still there, or of a type this server does not serve: an owner
        // we cannot see is never taken for gone.
        _ => Owner::Present,
    }
}

/// Whether the referenced owner exists in the store with its uid; None
/// when its type is not served here or the store does not answer.
async fn in_store(catalog: &Catalog, node: &Node, reference: &Value) -> Option<bool> {
    let api_version = reference["apiVersion"].as_str()?;
    let entry = entry_for_kind(catalog, api_version, reference["kind"].as_str()?)?;
    let namespace = match entry.strategy.def().namespaced {
        true => node.object.namespace().to_string(),
        false => String::new(),
    };
    let get = actor::Get {
        namespace,
        name: reference["name"].as_str()?.to_string(),
        part: Part::Main,
        resource_version: None,
    };
    match entry.actor.send(get).await.ok()? {
        Ok(owner) => Some(owner["metadata"]["uid"] == reference["uid"]),
        Err(ApiError::NotFound(_)) => Some(false),
        Err(_) => None,
    }
}

async fn orphan_dependents(world: &World, owner: &Node) {
    let mut waiting = false;
    for dependent in world.dependents_of(owner.uid()) {
        let kept: Vec<Value> = dependent
            .owner_refs()
            .iter()
            .filter(|r| r["uid"] != owner.uid())
            .cloned()
            .collect();
        world::set_metadata(dependent, "ownerReferences", kept.into()).await;
        waiting = true;
    }
    // The next pass sees the dependents let go and drops the finalizer.
    if !waiting {
        drop_finalizer(owner, ORPHAN).await;
    }
}

async fn drop_finalizer(node: &Node, finalizer: &str) {
    let kept: Vec<Value> = node
        .finalizers()
        .into_iter()
        .filter(|f| f != finalizer)
        .map(Value::from)
        .collect();
    world::set_metadata(node, "finalizers", kept.into()).await;
}
