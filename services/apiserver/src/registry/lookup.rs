//! The registry's side of `admission::objects::Objects`: the plugins'
//! reads come from the resource actors' watch caches (or, when asked, the
//! store), and their compare-and-swap writes go to the store, through
//! the same `storage::Interface` each type's flow uses.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use serde_json::Value;

use super::catalog::Entry;
use super::flow::Handle;
use super::{Catalog, ResourceDef};
use crate::admission::objects::{Freshness, Lookup, LookupError, Objects, Resource, ServedKind};
use crate::object::meta;
use crate::storage::{ListRequest, ReadAt, StorageError};

/// The handles (Cacher-backed) of the types admission may look at.
pub struct CachedObjects {
    handles: HashMap<(String, String), Handle>,
    /// The catalog, for the types CRDs add at run time (a policy's
    /// paramKind). Weak: the catalog's admission chain holds these.
    catalog: Weak<Catalog>,
}

impl CachedObjects {
    /// Every served type's handle, as the catalog lends it.
    pub async fn of(catalog: &Catalog) -> CachedObjects {
        let mut handles = HashMap::new();
        for entry in catalog.entries().iter().filter(|e| e.primary) {
            let def = entry.handle.def();
            let key = (def.group.to_string(), def.resource.to_string());
            handles.insert(key, entry.handle.clone());
        }
        CachedObjects {
            handles,
            catalog: Weak::new(),
        }
    }

    /// These objects, and those of the custom types `catalog` serves.
    pub fn with_custom_types(self, catalog: &Arc<Catalog>) -> CachedObjects {
        CachedObjects {
            catalog: Arc::downgrade(catalog),
            ..self
        }
    }

    /// The storage-version entry of a custom type `pick` chooses.
    fn custom_entry(&self, pick: impl Fn(&ResourceDef) -> bool) -> Option<Entry> {
        let catalog = self.catalog.upgrade()?;
        let entries = catalog.custom_entries().into_iter();
        entries
            .filter(|e| e.primary)
            .find(|e| pick(e.strategy.def()))
    }

    /// A built-in type's handle, or a custom type's from the catalog.
    async fn any_handle(&self, resource: Resource) -> Result<Handle, LookupError> {
        if let Some(handle) = self.served(resource.group, resource.resource) {
            return Ok(handle.clone());
        }
        let entry = self
            .custom_entry(|d| d.group == resource.group && d.resource == resource.resource)
            .ok_or(LookupError::Unknown(resource))?;
        Ok(entry.handle)
    }

    fn handle(&self, resource: Resource) -> Result<&Handle, LookupError> {
        self.served(resource.group, resource.resource)
            .ok_or(LookupError::Unknown(resource))
    }

    fn served(&self, group: &str, resource: &str) -> Option<&Handle> {
        self.handles.get(&(group.to_string(), resource.to_string()))
    }

    /// The objects of any served type in `namespace` (the quota
    /// controller counts types it learns from quotas); none when the type
    /// is not served.
    pub async fn list_of(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        freshness: Freshness,
    ) -> Result<Vec<Value>, LookupError> {
        match self.served(group, resource) {
            Some(h) => list(h, namespace, freshness).await,
            None => Ok(Vec::new()),
        }
    }
}

async fn list(
    h: &Handle,
    namespace: &str,
    freshness: Freshness,
) -> Result<Vec<Value>, LookupError> {
    let prefix = h.collection(Some(namespace).filter(|ns| !ns.is_empty()));
    let request = ListRequest {
        at: match freshness {
            Freshness::Cached => ReadAt::Any,
            Freshness::Current => ReadAt::Latest,
        },
        ..ListRequest::default()
    };
    let listing = h.store.get_list(&prefix, request).await;
    let items = listing.map_err(unavailable)?.items;
    Ok(items.iter().map(|o| o.value()).collect())
}

fn unavailable(err: StorageError) -> LookupError {
    LookupError::Unavailable(err.to_string())
}

impl Objects for CachedObjects {
    fn get<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        name: &'a str,
        freshness: Freshness,
    ) -> Lookup<'a, Option<Value>> {
        Box::pin(async move {
            let h = self.any_handle(resource).await?;
            let key = h.key(namespace, name);
            let found = match freshness {
                Freshness::Cached => h.store.get_at(&key, ReadAt::Any).await,
                Freshness::Current => h.store.get(&key).await,
            };
            Ok(found.map_err(unavailable)?.map(|stored| stored.object))
        })
    }

    fn list<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        freshness: Freshness,
    ) -> Lookup<'a, Vec<Value>> {
        Box::pin(async move { list(&self.any_handle(resource).await?, namespace, freshness).await })
    }

    fn served_kind(&self, api_version: &str, kind: &str) -> Option<ServedKind> {
        let wanted = |d: &ResourceDef| d.kind == kind && d.api_version() == api_version;
        let mut defs = self.handles.values().map(Handle::def);
        // Any served version names the type; its objects are read at the
        // storage version.
        let custom = || {
            let entries = self.catalog.upgrade()?.custom_entries();
            let served = entries.iter().find(|e| wanted(e.strategy.def()))?;
            Some(served.strategy.def().clone())
        };
        let def = match defs.find(|d| wanted(d)).cloned() {
            Some(def) => def,
            None => custom()?,
        };
        Some(ServedKind {
            resource: Resource {
                group: def.group,
                resource: def.resource,
            },
            namespaced: def.namespaced,
        })
    }

    fn swap<'a>(&'a self, resource: Resource, object: &'a Value) -> Lookup<'a, bool> {
        Box::pin(async move {
            let h = self.handle(resource)?;
            let revision: i64 = meta::resource_version(object).parse().map_err(|_| {
                LookupError::Unavailable("an object to swap needs its resourceVersion".into())
            })?;
            let key = h.key(meta::namespace(object), meta::name(object));
            let mut stored = object.clone();
            meta::metadata_mut(&mut stored).remove("resourceVersion");
            match h.store.update(&key, &stored, revision).await {
                Ok(_) => Ok(true),
                Err(StorageError::Conflict) => Ok(false),
                Err(err) => Err(unavailable(err)),
            }
        })
    }
}
