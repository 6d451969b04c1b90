//! An informer's cache: objects by `namespace/name` (client-go's
//! `MetaNamespaceKeyFunc`), as `Arc`s so readers share them without
//! copying, with named indexes kept up to date on every change.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Resource;
use parking_lot::RwLock;

/// The index every store has: objects by namespace.
pub const BY_NAMESPACE: &str = "namespace";

/// An index function: the values an object is filed under.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// `namespace/name`, or `name` for a cluster-scoped object.
pub fn key_of<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// `namespace/name` from parts (`None` for cluster-scoped).
pub fn key_from(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// A read view of an informer's cache. Clones share it.
pub struct Store<K> {
    cache: Arc<RwLock<Cache<K>>>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            cache: self.cache.clone(),
        }
    }
}

pub(super) struct Cache<K> {
    objects: HashMap<String, Arc<K>>,
    indexers: HashMap<String, IndexFn<K>>,
    /// index name -> value -> keys
    indices: HashMap<String, HashMap<String, HashSet<String>>>,
    resource_version: Option<String>,
}

impl<K: Resource + 'static> Store<K> {
    pub(super) fn new() -> Store<K> {
        let mut cache = Cache {
            objects: HashMap::new(),
            indexers: HashMap::new(),
            indices: HashMap::new(),
            resource_version: None,
        };
        let by_namespace: IndexFn<K> =
            Arc::new(|o: &K| o.meta().namespace.clone().into_iter().collect());
        cache
            .indexers
            .insert(BY_NAMESPACE.to_string(), by_namespace);
        Store {
            cache: Arc::new(RwLock::new(cache)),
        }
    }

    /// The object at `namespace/name` (`namespace` `None` for cluster-scoped).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.get_by_key(&key_from(namespace, name))
    }

    /// The object at `key` (`namespace/name` or `name`).
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.cache.read().objects.get(key).cloned()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.cache.read().objects.values().cloned().collect()
    }

    /// Every key.
    pub fn keys(&self) -> Vec<String> {
        self.cache.read().objects.keys().cloned().collect()
    }

    /// The objects in `namespace`.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(BY_NAMESPACE, namespace)
    }

    /// The objects filed under `value` in index `index` (none if the
    /// index does not exist).
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let cache = self.cache.read();
        let Some(keys) = cache.indices.get(index).and_then(|i| i.get(value)) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| cache.objects.get(k).cloned())
            .collect()
    }

    /// The keys filed under `value` in index `index`.
    pub fn keys_by_index(&self, index: &str, value: &str) -> Vec<String> {
        let cache = self.cache.read();
        cache
            .indices
            .get(index)
            .and_then(|i| i.get(value))
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.cache.read().objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resourceVersion of the newest change applied.
    pub fn resource_version(&self) -> Option<String> {
        self.cache.read().resource_version.clone()
    }

    /// Adds an index, filing every cached object under it at once.
    pub(super) fn add_index(&self, name: &str, index: IndexFn<K>) {
        let mut cache = self.cache.write();
        let mut values: HashMap<String, HashSet<String>> = HashMap::new();
        for (key, object) in &cache.objects {
            for value in index(object) {
                values.entry(value).or_default().insert(key.clone());
            }
        }
        cache.indices.insert(name.to_string(), values);
        cache.indexers.insert(name.to_string(), index);
    }

    /// Stores `object`; the object it replaced, if any.
    pub(super) fn insert(&self, key: String, object: Arc<K>) -> Option<Arc<K>> {
        let mut cache = self.cache.write();
        cache.resource_version = object.meta().resource_version.clone();
        let old = cache.objects.insert(key.clone(), object.clone());
        if let Some(old) = &old {
            cache.unindex(&key, old);
        }
        cache.index(&key, &object);
        old
    }

    /// Removes the object at `key`; the last state cached.
    pub(super) fn remove(&self, key: &str, resource_version: Option<String>) -> Option<Arc<K>> {
        let mut cache = self.cache.write();
        if resource_version.is_some() {
            cache.resource_version = resource_version;
        }
        let old = cache.objects.remove(key)?;
        cache.unindex(key, &old);
        Some(old)
    }

    /// Swaps in a fresh listing; the old contents.
    pub(super) fn replace(
        &self,
        objects: HashMap<String, Arc<K>>,
        resource_version: Option<String>,
    ) -> HashMap<String, Arc<K>> {
        let mut cache = self.cache.write();
        let old = std::mem::replace(&mut cache.objects, objects);
        let Cache {
            objects,
            indexers,
            indices,
            ..
        } = &mut *cache;
        for (name, index) in indexers.iter() {
            let mut values: HashMap<String, HashSet<String>> = HashMap::new();
            for (key, object) in objects.iter() {
                for value in index(object) {
                    values.entry(value).or_default().insert(key.clone());
                }
            }
            indices.insert(name.clone(), values);
        }
        if resource_version.is_some() {
            cache.resource_version = resource_version;
        }
        old
    }
}

impl<K> Cache<K> {
    fn index(&mut self, key: &str, object: &K) {
        for (name, index) in &self.indexers {
            let values = self.indices.entry(name.clone()).or_default();
            for value in index(object) {
                values.entry(value).or_default().insert(key.to_string());
            }
        }
    }

    fn unindex(&mut self, key: &str, object: &K) {
        for (name, index) in &self.indexers {
            let Some(values) = self.indices.get_mut(name) else {
                continue;
            };
            for value in index(object) {
                if let Some(keys) = values.get_mut(&value) {
                    keys.remove(key);
                    if keys.is_empty() {
                        values.remove(&value);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(ns: &str, name: &str, node: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": ns, "name": name, "resourceVersion": "1"},
                "spec": {"nodeName": node, "containers": []},
            }))
            .unwrap(),
        )
    }

    fn by_node() -> IndexFn<Pod> {
        Arc::new(|p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        })
    }

    #[test]
    fn indexes_follow_inserts_moves_and_removals() {
        let store = Store::<Pod>::new();
        store.add_index("node", by_node());
        store.insert("a/p1".into(), pod("a", "p1", "n1"));
        store.insert("b/p2".into(), pod("b", "p2", "n1"));
        assert_eq!(store.by_index("node", "n1").len(), 2);
        assert_eq!(store.list_namespace("a").len(), 1);
        // p1 moves to n2.
        let old = store.insert("a/p1".into(), pod("a", "p1", "n2"));
        assert!(old.is_some());
        assert_eq!(store.keys_by_index("node", "n1"), vec!["b/p2".to_string()]);
        assert_eq!(store.keys_by_index("node", "n2"), vec!["a/p1".to_string()]);
        store.remove("b/p2", None);
        assert!(store.by_index("node", "n1").is_empty());
        assert!(store.list_namespace("b").is_empty());
        assert_eq!(
            store.get(Some("a"), "p1").unwrap().metadata.name.as_deref(),
            Some("p1")
        );
    }

    #[test]
    fn an_index_added_late_files_what_is_cached() {
        let store = Store::<Pod>::new();
        store.insert("a/p1".into(), pod("a", "p1", "n1"));
        store.add_index("node", by_node());
        assert_eq!(store.keys_by_index("node", "n1"), vec!["a/p1".to_string()]);
    }

    #[test]
    fn replace_rebuilds_every_index() {
        let store = Store::<Pod>::new();
        store.add_index("node", by_node());
        store.insert("a/p1".into(), pod("a", "p1", "n1"));
        let fresh = HashMap::from([("a/p2".to_string(), pod("a", "p2", "n3"))]);
        let old = store.replace(fresh, Some("9".into()));
        assert!(old.contains_key("a/p1"));
        assert!(store.by_index("node", "n1").is_empty());
        assert_eq!(store.keys_by_index("node", "n3"), vec!["a/p2".to_string()]);
        assert_eq!(store.resource_version().as_deref(), Some("9"));
    }
}
