//! Controller references, kube's `ControllerRefManager`: an owner claims
//! the objects its selector matches. An orphan that matches is adopted
//! (its ownerReferences gain the owner as controller), an owned object
//! that no longer matches is released, and objects another controller
//! owns are left alone. Adoption re-reads the owner from the API first, so
//! an owner being deleted (or replaced by a namesake) never adopts.

use std::fmt::Debug;
use std::sync::Arc;

use capstan_client::informer::Store;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::core::{NamespaceResourceScope, Selector, SelectorExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{Error, Result};

/// The owner reference that marks `meta`'s controller, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The UID of `meta`'s controller, if any.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    controller_of(meta).map(|r| r.uid.as_str())
}

/// A controller reference to `owner` for the objects it makes, with
/// blockOwnerDeletion so a foreground deletion of the owner waits for them.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Index function: the UID of an object's controller (for
/// `Informer::add_index`), so an owner finds its objects without a scan.
pub fn by_controller_uid<K: Resource>(object: &K) -> Vec<String> {
    controller_uid(object.meta())
        .map(str::to_string)
        .into_iter()
        .collect()
}

/// Index function: the namespace of objects that have no controller, so
/// an owner finds orphans to adopt without scanning its owned neighbours.
pub fn orphans_by_namespace<K: Resource>(object: &K) -> Vec<String> {
    match controller_of(object.meta()) {
        Some(_) => Vec::new(),
        None => object.meta().namespace.clone().into_iter().collect(),
    }
}

/// The index names the two functions above are registered under.
pub const BY_CONTROLLER: &str = "controller-uid";
pub const ORPHANS: &str = "orphans";

/// Claims objects of type `K` for one owner.
pub struct Claim<'a, K> {
    /// Writes adoption and release patches.
    pub api: Api<K>,
    pub owner: OwnerReference,
    pub owner_deleting: bool,
    pub selector: &'a Selector,
}

impl<K> Claim<'_, K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
{
    /// The objects the owner controls after adopting and releasing:
    /// `owned` (indexed by the owner's UID) and `orphans` (of its
    /// namespace). `can_adopt` re-reads the owner from the API (see
    /// [`still_adoptable`]); it is asked only when an orphan matches.
    pub async fn claim<F, Fut>(
        &self,
        owned: Vec<Arc<K>>,
        orphans: Vec<Arc<K>>,
        can_adopt: F,
    ) -> Result<Vec<Arc<K>>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<bool>>,
    {
        let mut claimed = Vec::with_capacity(owned.len());
        for object in owned {
            let labels = object.meta().labels.clone().unwrap_or_default();
            if self.selector.matches(&labels) || self.owner_deleting {
                claimed.push(object);
                continue;
            }
            self.release(&object).await?;
        }
        let matching: Vec<Arc<K>> = orphans
            .into_iter()
            .filter(|o| o.meta().deletion_timestamp.is_none())
            .filter(|o| {
                self.selector
                    .matches(&o.meta().labels.clone().unwrap_or_default())
            })
            .collect();
        if matching.is_empty() || self.owner_deleting || !can_adopt().await? {
            return Ok(claimed);
        }
        for orphan in matching {
            if let Some(adopted) = self.adopt(&orphan).await? {
                claimed.push(Arc::new(adopted));
            }
        }
        Ok(claimed)
    }

    /// Adds the owner as controller; None if the object changed or went
    /// meanwhile (the next sync sees it as it is).
    async fn adopt(&self, object: &K) -> Result<Option<K>> {
        let meta = object.meta();
        let mut references = meta.owner_references.clone().unwrap_or_default();
        references.push(self.owner.clone());
        self.patch_references(meta, references).await
    }

    async fn release(&self, object: &K) -> Result<()> {
        let meta = object.meta();
        let kept: Vec<OwnerReference> = meta
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.uid != self.owner.uid)
            .cloned()
            .collect();
        self.patch_references(meta, kept).await.map(|_| ())
    }

    /// A merge patch of the whole list, conditional on the version read:
    /// a concurrent change is a conflict, never a lost reference.
    async fn patch_references(
        &self,
        meta: &ObjectMeta,
        references: Vec<OwnerReference>,
    ) -> Result<Option<K>> {
        let name = meta.name.as_deref().unwrap_or_default();
        let patch = json!({"metadata": {
            "ownerReferences": references,
            "resourceVersion": meta.resource_version,
        }});
        let params = PatchParams::default();
        match self.api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(patched) => Ok(Some(patched)),
            Err(err) => {
                let err = Error::from(err);
                if err.is_not_found() || err.is_conflict() {
                    return Ok(None);
                }
                Err(err)
            }
        }
    }
}

/// An owner's selector, parsed: an empty one selects everything and is
/// refused, as kube's controllers refuse it.
pub fn parse_selector(selector: &LabelSelector) -> std::result::Result<Selector, String> {
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty());
    if empty {
        return Err("empty selector is not allowed".into());
    }
    Selector::try_from(selector.clone()).map_err(|e| e.0)
}

/// The objects of type `K` in `cache` (indexed by [`BY_CONTROLLER`] and
/// [`ORPHANS`]) that `owner` controls after adoption and release.
pub async fn claim_from_cache<K, O>(
    cache: &Store<K>,
    client: &kube::Client,
    owner: &O,
    selector: &Selector,
) -> Result<Vec<Arc<K>>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + 'static,
    O: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let meta = owner.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let uid = meta.uid.clone().unwrap_or_default();
    let reference = controller_ref(owner);
    let claim = Claim {
        api: Api::<K>::namespaced(client.clone(), &namespace),
        owner: reference.clone(),
        owner_deleting: meta.deletion_timestamp.is_some(),
        selector,
    };
    let owners: Api<O> = Api::namespaced(client.clone(), &namespace);
    claim
        .claim(
            cache.by_index(BY_CONTROLLER, &uid),
            cache.by_index(ORPHANS, &namespace),
            || still_adoptable(&owners, &reference),
        )
        .await
}

/// Whether the owner read fresh from the API is the one in `reference`
/// and is not being deleted (kube's `RecheckDeletionTimestamp`).
pub async fn still_adoptable<K>(api: &Api<K>, reference: &OwnerReference) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let fresh = match api.get(&reference.name).await {
        Ok(fresh) => fresh,
        Err(err) => {
            let err = Error::from(err);
            return if err.is_not_found() {
                Ok(false)
            } else {
                Err(err)
            };
        }
    };
    let meta = fresh.meta();
    Ok(meta.uid.as_deref() == Some(reference.uid.as_str()) && meta.deletion_timestamp.is_none())
}
