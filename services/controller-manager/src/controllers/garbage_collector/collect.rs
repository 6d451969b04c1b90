//! One object's garbage collection, kube's rules:
//! - an owner deleted with `orphan` first lets go of its dependents, then
//!   of the finalizer;
//! - an owner deleted in the foreground (`foregroundDeletion`) goes once
//!   no dependent blocks it (blockOwnerDeletion), after asking those to go;
//! - an object whose owners are all gone (checked against the API, not
//!   only the caches, which trail it by different amounts per type) is
//!   deleted, in the foreground if an owner waits for it that way;
//! - an object with some owners gone loses the references to them.
//!
//! Every write is conditional on the object's UID or resourceVersion, so a
//! stale cache or a second collector can only cause a harmless refusal.

use capstan_client::queue::WorkQueue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde_json::{json, Value};

use super::graph::{Found, Graph, Type};
use crate::context::Reconciler;
use crate::error::{Error, Result};

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// What one owner reference points at.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Owner {
    Present,
    /// Being deleted in the foreground: waits for its dependents.
    Waiting,
    Gone,
}

pub struct Collector {
    pub graph: Graph,
    pub client: kube::Client,
    pub queue: Option<WorkQueue<String>>,
}

fn has_finalizer(object: &DynamicObject, finalizer: &str) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}

fn deleting(object: &DynamicObject) -> bool {
    object.metadata.deletion_timestamp.is_some()
}

impl Reconciler for Collector {
    /// Processes the object with `uid`, if it is still cached.
    async fn sync(&self, uid: &str) -> Result<()> {
        let Some(found) = self.graph.by_uid(uid) else {
            return Ok(());
        };
        let object = found.object.as_ref();
        if deleting(object) {
            if has_finalizer(object, ORPHAN) {
                return self.orphan_dependents(&found).await;
            }
            if has_finalizer(object, FOREGROUND) {
                return self.delete_dependents_first(&found).await;
            }
            return Ok(());
        }
        if object
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|r| !r.is_empty())
        {
            return self.check_owners(&found).await;
        }
        Ok(())
    }
}

impl Collector {
    fn api(&self, kind: &Type, namespace: Option<&str>) -> Api<DynamicObject> {
        match (kind.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &kind.resource),
            _ => Api::all_with(self.client.clone(), &kind.resource),
        }
    }

    fn api_for(&self, found: &Found) -> Api<DynamicObject> {
        self.api(&found.kind, found.object.metadata.namespace.as_deref())
    }

    /// Removes the references to the owner from every dependent; drops the
    /// `orphan` finalizer once none is left.
    async fn orphan_dependents(&self, owner: &Found) -> Result<()> {
        let uid = owner.object.metadata.uid.clone().unwrap_or_default();
        let dependents = self.graph.dependents(&uid);
        for dependent in &dependents {
            let kept = references_without(&dependent.object, |r| r.uid == uid);
            self.set_metadata(dependent, "ownerReferences", kept)
                .await?;
        }
        if dependents.is_empty() {
            self.drop_finalizer(owner, ORPHAN).await?;
        }
        Ok(())
    }

    /// A foreground deletion: the owner goes once no dependent blocks it;
    /// blocking dependents not yet going are looked at (they see their
    /// owner waiting and delete themselves).
    async fn delete_dependents_first(&self, owner: &Found) -> Result<()> {
        let uid = owner.object.metadata.uid.clone().unwrap_or_default();
        let blocking: Vec<Found> = self
            .graph
            .dependents(&uid)
            .into_iter()
            .filter(|d| blocks(&d.object, &uid))
            .collect();
        if blocking.is_empty() {
            return self.drop_finalizer(owner, FOREGROUND).await;
        }
        for dependent in blocking.iter().filter(|d| !deleting(&d.object)) {
            if let (Some(queue), Some(uid)) = (&self.queue, dependent.object.metadata.uid.clone()) {
                queue.add(uid);
            }
        }
        Ok(())
    }

    /// Classifies the owners; deletes an object none of whose owners
    /// remains, or drops the references to the gone ones.
    async fn check_owners(&self, found: &Found) -> Result<()> {
        let references = found
            .object
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default();
        let mut states = Vec::with_capacity(references.len());
        for reference in &references {
            states.push(self.owner_state(found, reference).await?);
        }
        if states.contains(&Owner::Present) {
            if states.iter().any(|s| *s != Owner::Present) {
                let kept: Vec<OwnerReference> = references
                    .iter()
                    .zip(&states)
                    .filter(|(_, s)| **s == Owner::Present)
                    .map(|(r, _)| r.clone())
                    .collect();
                self.set_metadata(found, "ownerReferences", kept).await?;
            }
            return Ok(());
        }
        let uid = found.object.metadata.uid.clone().unwrap_or_default();
        let has_dependents = !self.graph.dependents(&uid).is_empty();
        let policy = match states.contains(&Owner::Waiting) && has_dependents {
            true => "Foreground",
            false => "Background",
        };
        self.delete(found, policy).await
    }

    /// Where an owner reference points: the caches first, then the API
    /// (a type's cache may trail another's). An owner that cannot be read
    /// is never taken for gone; one whose type the collector does not
    /// watch yet (a custom type discovery has not brought) is an error, so
    /// the object is looked at again with backoff: no later event of its
    /// own may come to bring it back once its owner's type is known.
    async fn owner_state(&self, found: &Found, reference: &OwnerReference) -> Result<Owner> {
        if let Some(owner) = self.graph.by_uid(&reference.uid) {
            let waiting = deleting(&owner.object) && has_finalizer(&owner.object, FOREGROUND);
            return Ok(if waiting {
                Owner::Waiting
            } else {
                Owner::Present
            });
        }
        let Some(kind) = self.graph.type_of(&reference.api_version, &reference.kind) else {
            return Err(Error::UnknownType(format!(
                "{}, Kind={}",
                reference.api_version, reference.kind
            )));
        };
        let namespace = found.object.metadata.namespace.as_deref();
        if !kind.namespaced || namespace.is_some() {
            let api = self.api(&kind, namespace);
            return match api.get_opt(&reference.name).await {
                Ok(Some(owner))
                    if owner.metadata.uid.as_deref() == Some(reference.uid.as_str()) =>
                {
                    let waiting = deleting(&owner) && has_finalizer(&owner, FOREGROUND);
                    Ok(if waiting {
                        Owner::Waiting
                    } else {
                        Owner::Present
                    })
                }
                Ok(_) => Ok(Owner::Gone),
                Err(err) => Err(Error::from(err)),
            };
        }
        // A cluster-scoped object cannot be owned by a namespaced one.
        Ok(Owner::Gone)
    }

    async fn delete(&self, found: &Found, policy: &str) -> Result<()> {
        let name = found.object.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams {
            propagation_policy: Some(match policy {
                "Foreground" => kube::api::PropagationPolicy::Foreground,
                _ => kube::api::PropagationPolicy::Background,
            }),
            preconditions: Some(Preconditions {
                uid: found.object.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(%name, kind = %found.kind.resource.kind, policy, "collecting");
        ignore_gone(self.api_for(found).delete(&name, &params).await.map(|_| ()))
    }

    async fn drop_finalizer(&self, found: &Found, finalizer: &str) -> Result<()> {
        let kept: Vec<String> = found
            .object
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        self.set_metadata(found, "finalizers", kept).await
    }

    /// Sets one metadata list, if the object is unchanged since cached.
    async fn set_metadata<T: serde::Serialize>(
        &self,
        found: &Found,
        field: &str,
        list: Vec<T>,
    ) -> Result<()> {
        let value = match list.is_empty() {
            true => Value::Null,
            false => json!(list),
        };
        let patch = json!({"metadata": {
            field: value,
            "resourceVersion": found.object.metadata.resource_version,
        }});
        let name = found.object.metadata.name.clone().unwrap_or_default();
        let params = PatchParams::default();
        ignore_gone(
            self.api_for(found)
                .patch(&name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
        )
    }
}

/// Whether `dependent` blocks the foreground deletion of owner `uid`.
fn blocks(dependent: &DynamicObject, uid: &str) -> bool {
    let references = dependent.metadata.owner_references.iter().flatten();
    references
        .filter(|r| r.uid == uid)
        .any(|r| r.block_owner_deletion == Some(true))
}

fn references_without(
    object: &DynamicObject,
    drop: impl Fn(&OwnerReference) -> bool,
) -> Vec<OwnerReference> {
    let references = object.metadata.owner_references.iter().flatten();
    references.filter(|r| !drop(r)).cloned().collect()
}

/// NotFound and Conflict: someone else got there first; the watch will
/// bring the object back to the queue if anything is left to do.
fn ignore_gone(result: std::result::Result<(), kube::Error>) -> Result<()> {
    match result.map_err(Error::from) {
        Err(err) if err.is_not_found() || err.is_conflict() => Ok(()),
        other => other,
    }
}
