//! The garbage collector's view of the cluster: one metadata-only cache
//! per served type (shared informers on every listable, watchable,
//! deletable resource), indexed by UID and by owner UID, so an owner and
//! its dependents are found without a scan of anything.

use std::sync::Arc;

use capstan_client::informer::Store;
use kube::api::{ApiResource, DynamicObject};
use parking_lot::RwLock;

pub const BY_UID: &str = "uid";
pub const BY_OWNER: &str = "owner-uid";

pub fn uid_index(object: &DynamicObject) -> Vec<String> {
    object.metadata.uid.clone().into_iter().collect()
}

pub fn owner_index(object: &DynamicObject) -> Vec<String> {
    let references = object.metadata.owner_references.iter().flatten();
    references.map(|r| r.uid.clone()).collect()
}

/// One served type and its cache.
#[derive(Clone)]
pub struct Type {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub store: Store<DynamicObject>,
}

/// An object found in the caches, with its type.
#[derive(Clone)]
pub struct Found {
    pub kind: Type,
    pub object: Arc<DynamicObject>,
}

/// Every watched type. Clones share it; types are added as discovery
/// finds them (custom resources appear while the manager runs).
#[derive(Clone, Default)]
pub struct Graph {
    types: Arc<RwLock<Vec<Type>>>,
}

impl Graph {
    pub fn add(&self, kind: Type) {
        self.types.write().push(kind);
    }

    pub fn has(&self, resource: &ApiResource) -> bool {
        let same =
            |t: &Type| t.resource.group == resource.group && t.resource.plural == resource.plural;
        self.types.read().iter().any(same)
    }

    /// The type serving `kind` in `api_version`'s group.
    pub fn type_of(&self, api_version: &str, kind: &str) -> Option<Type> {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        let types = self.types.read();
        types
            .iter()
            .find(|t| t.resource.group == group && t.resource.kind == kind)
            .cloned()
    }

    /// The cached object with `uid`, of any type.
    pub fn by_uid(&self, uid: &str) -> Option<Found> {
        let types = self.types.read();
        types.iter().find_map(|t| {
            let object = t.store.by_index(BY_UID, uid).into_iter().next()?;
            Some(Found {
                kind: t.clone(),
                object,
            })
        })
    }

    /// Every cached object naming `uid` as an owner.
    pub fn dependents(&self, uid: &str) -> Vec<Found> {
        let types = self.types.read();
        types
            .iter()
            .flat_map(|t| {
                t.store
                    .by_index(BY_OWNER, uid)
                    .into_iter()
                    .map(|object| Found {
                        kind: t.clone(),
                        object,
                    })
            })
            .collect()
    }
}
