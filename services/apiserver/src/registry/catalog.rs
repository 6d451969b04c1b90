//! The catalog: which resource types are served, and the address of the
//! actor of each, looked up by group and resource.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;

use super::actor::ResourceActor;
use super::handle::Handle;
use super::kinds;
use super::Strategy;
use crate::storage::{Interface, StorageError, Store};

pub struct Entry {
    pub strategy: Arc<dyn Strategy>,
    pub actor: Addr<ResourceActor>,
}

pub struct Catalog {
    entries: Vec<Entry>,
    /// Told after every delete (see [`Handle::deletions`]).
    pub deletions: Arc<tokio::sync::Notify>,
    /// The admission chain every type's writes go through (empty until
    /// `startup.rs` installs the plugins).
    pub admission: Arc<crate::admission::Chain>,
    index: HashMap<(String, String, String), usize>,
}

impl Catalog {
    /// Starts one actor per type, spread over `arbiters`.
    /// Core events expire after `event_ttl`, as kube-apiserver's do.
    pub async fn start(
        client: &crate::storage::Connection,
        prefix: &str,
        event_ttl: std::time::Duration,
        arbiters: &[actix::ArbiterHandle],
    ) -> Result<Catalog, StorageError> {
        let deletions = Arc::new(tokio::sync::Notify::new());
        let store: Arc<dyn Interface> = Arc::new(Store::new(client));
        let strategies = kinds::all();
        let admission = Arc::new(crate::admission::Chain::default());
        let bare = |strategy: &Arc<dyn Strategy>| Handle {
            strategy: strategy.clone(),
            store: store.clone(),
            prefix: prefix.to_string(),
            namespace_contents: Vec::new(),
            namespaces: None,
            deletions: deletions.clone(),
            expiry: strategy.expires().then_some(event_ttl),
            admission: admission.clone(),
        };
        let namespaces = strategies
            .iter()
            .find(|s| s.holds_contents())
            .map(|s| Arc::new(bare(s)));
        let handle_of = |strategy: &Arc<dyn Strategy>| Handle {
            namespaces: namespaces.clone().filter(|_| strategy.def().namespaced),
            ..bare(strategy)
        };
        let contents: Vec<Handle> = strategies
            .iter()
            .filter(|s| s.def().namespaced)
            .map(handle_of)
            .collect();
        let mut entries = Vec::new();
        for (i, strategy) in strategies.into_iter().enumerate() {
            let mut handle = handle_of(&strategy);
            if strategy.holds_contents() {
                handle.namespace_contents = contents.clone();
            }
            let actor = ResourceActor::start(handle, &arbiters[i % arbiters.len()]).await?;
            entries.push(Entry { strategy, actor });
        }
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let def = e.strategy.def();
                (
                    (
                        def.group.to_string(),
                        def.version.to_string(),
                        def.resource.to_string(),
                    ),
                    i,
                )
            })
            .collect();
        Ok(Catalog {
            entries,
            deletions,
            admission,
            index,
        })
    }

    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<&Entry> {
        let key = (group.to_string(), version.to_string(), resource.to_string());
        self.index.get(&key).map(|i| &self.entries[*i])
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Served groups in order of first appearance, with their versions.
    pub fn groups(&self) -> Vec<(&'static str, &'static str)> {
        let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
        for entry in &self.entries {
            let def = entry.strategy.def();
            if !groups
                .iter()
                .any(|(g, v)| *g == def.group && *v == def.version)
            {
                groups.push((def.group, def.version));
            }
        }
        groups
    }
}
