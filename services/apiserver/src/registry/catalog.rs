//! The catalog: which resource types are served, and the address of the
//! actor of each, looked up by group and resource. The built-in types are
//! fixed at start; types defined at run time (custom resources) are
//! served and withdrawn while the server runs.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use actix::Addr;

use super::actor::{ResourceActor, Stop};
use super::conversion::Conversion;
use super::flow::{Handle, NamespaceContents};
use super::kinds;
use super::requests::Request;
use super::Strategy;
use crate::error::ApiError;
use crate::storage::{Interface, StorageError, Store};

#[derive(Clone)]
pub struct Entry {
    pub strategy: Arc<dyn Strategy>,
    /// The actor owning the type's watch cache: watches start there.
    pub actor: Addr<ResourceActor>,
    /// The actor's handle, whose storage is its watch cache: reads and
    /// writes run with it on the caller's task (see `requests::Request`).
    pub handle: Handle,
    /// The entry of its type's storage version: of a type served in
    /// several versions, the one to go through once per object (garbage
    /// collection, namespace contents, admission lookups).
    pub primary: bool,
}

impl Entry {
    /// Runs `request` with the type's handle, on the caller's task.
    pub async fn call<R: Request>(&self, request: R) -> Result<R::Output, ApiError> {
        request.run(&self.handle).await
    }
}

pub struct Catalog {
    entries: Vec<Entry>,
    /// The admission chain every type's writes go through (empty until
    /// `startup` installs the plugins).
    pub admission: Arc<crate::admission::Chain>,
    index: HashMap<(String, String, String), usize>,
    /// Types defined at run time, and what starting one needs.
    custom: RwLock<Vec<Entry>>,
    starter: Starter,
}

/// What every type's handle shares, and what a type started after the
/// catalog needs.
struct Starter {
    store: Arc<dyn Interface>,
    admission: Arc<crate::admission::Chain>,
    /// How long the objects of kinds that expire live.
    event_ttl: std::time::Duration,
    /// The namespaced types a namespace holds: custom types join it.
    contents: NamespaceContents,
    arbiters: Vec<actix::ArbiterHandle>,
}

impl Starter {
    /// A handle on `strategy`'s objects under `prefix`.
    fn handle(&self, strategy: &Arc<dyn Strategy>, prefix: &str) -> Handle {
        let def = strategy.def();
        Handle {
            strategy: strategy.clone(),
            store: self.store.clone(),
            prefix: prefix.to_string(),
            namespace_contents: match def.deletion.holds_contents {
                true => self.contents.clone(),
                false => NamespaceContents::default(),
            },
            expiry: def.expires.then_some(self.event_ttl),
            admission: self.admission.clone(),
        }
    }
}

impl Catalog {
    /// Starts one actor per type, spread over `arbiters`.
    /// Core events expire after `event_ttl`, as kube-apiserver's do.
    pub async fn start(
        store: &Store,
        prefix: &str,
        event_ttl: std::time::Duration,
        arbiters: &[actix::ArbiterHandle],
    ) -> Result<Catalog, StorageError> {
        let mut starter = Starter {
            store: Arc::new(store.clone()),
            admission: Arc::new(crate::admission::Chain::default()),
            event_ttl,
            contents: NamespaceContents::default(),
            arbiters: arbiters.to_vec(),
        };
        let strategies = kinds::all();
        let namespaced = strategies
            .iter()
            .filter(|s| s.def().namespaced && stored_as_is(s.as_ref()));
        let contents = namespaced.map(|s| starter.handle(s, prefix)).collect();
        starter.contents = NamespaceContents::new(contents);
        let entries = start_actors(&starter, &strategies, prefix).await?;
        Ok(Catalog {
            index: index(&entries),
            entries,
            admission: starter.admission.clone(),
            custom: RwLock::new(Vec::new()),
            starter,
        })
    }

    /// Serves `strategy`'s type from now on, its objects under
    /// `prefix` (`/registry/example.com`): an actor with its own Cacher,
    /// in place of the one serving the same group and resource before.
    pub async fn serve(
        &self,
        strategy: Arc<dyn Strategy>,
        prefix: &str,
    ) -> Result<(), StorageError> {
        self.serve_versions(vec![strategy], None, prefix).await
    }

    /// Serves one type in the versions of `strategies` (the same group and
    /// resource), converted by `conversion` over its storage version
    /// (only the first version without one), in place of the actors
    /// serving it before.
    pub async fn serve_versions(
        &self,
        strategies: Vec<Arc<dyn Strategy>>,
        conversion: Option<Conversion>,
        prefix: &str,
    ) -> Result<(), StorageError> {
        let Some(first) = strategies.first().cloned() else {
            return Ok(());
        };
        let namespaced = first.def().namespaced;
        let arbiters = &self.starter.arbiters;
        let count = self.custom.read().unwrap_or_else(|e| e.into_inner()).len();
        let arbiter = &arbiters[count % arbiters.len()];
        let handles: Vec<Handle> = strategies
            .iter()
            .map(|s| self.starter.handle(s, prefix))
            .collect();
        let entries = match conversion {
            Some(conversion) => serve_versions(handles, strategies, conversion, arbiter).await?,
            None => {
                let (actor, handle) = ResourceActor::start(handles[0].clone(), arbiter).await?;
                vec![Entry {
                    strategy: first.clone(),
                    actor,
                    handle,
                    primary: true,
                }]
            }
        };
        if namespaced {
            if let Some(primary) = entries.iter().find(|e| e.primary) {
                self.starter.contents.serve(primary.handle.clone());
            }
        }
        let (group, resource) = (first.def().group, first.def().resource);
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom.retain(|e| {
            let keep = !same_type(e.strategy.as_ref(), first.as_ref());
            if !keep {
                e.actor.do_send(Stop);
            }
            keep
        });
        debug_assert!(entries
            .iter()
            .all(|e| e.strategy.def().group == group && e.strategy.def().resource == resource));
        custom.extend(entries);
        Ok(())
    }

    /// Stops serving the run-time type `resource` of `group`.
    pub fn withdraw(&self, group: &str, resource: &str) {
        self.starter.contents.withdraw(group, resource);
        let mut custom = self.custom.write().unwrap_or_else(|e| e.into_inner());
        custom.retain(|e| {
            let def = e.strategy.def();
            let keep = def.group != group || def.resource != resource;
            if !keep {
                e.actor.do_send(Stop);
            }
            keep
        });
    }

    /// The types defined at run time.
    pub fn custom_entries(&self) -> Vec<Entry> {
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom
            .iter()
            .filter(|e| e.strategy.served())
            .cloned()
            .collect()
    }

    /// The entry of each type's storage version, served or not: where
    /// each object is gone through once (garbage collection, a CRD's
    /// cleanup).
    pub fn primary_entries(&self) -> Vec<Entry> {
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        let all = self.entries.iter().chain(custom.iter());
        all.filter(|e| e.primary).cloned().collect()
    }

    /// Every served type: the built-in ones, then those defined at run time.
    pub fn all_entries(&self) -> Vec<Entry> {
        let mut all = self.entries.clone();
        all.extend(self.custom_entries());
        all
    }

    /// A built-in or run-time type.
    pub fn find_any(&self, group: &str, version: &str, resource: &str) -> Option<Entry> {
        if let Some(entry) = self.find(group, version, resource) {
            return Some(entry.clone());
        }
        let custom = self.custom.read().unwrap_or_else(|e| e.into_inner());
        custom
            .iter()
            .find(|e| {
                let def = e.strategy.def();
                let named = def.group == group && def.version == version;
                named && def.resource == resource && e.strategy.served()
            })
            .cloned()
    }

    /// A built-in type (those the server's own code works with).
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
        for entry in &self.all_entries() {
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

/// The actors of `strategies`, in their order: one per type served in
/// one version, one per version of a type served in several (sharing
/// its cache), spread over the arbiters.
async fn start_actors(
    starter: &Starter,
    strategies: &[Arc<dyn Strategy>],
    prefix: &str,
) -> Result<Vec<Entry>, StorageError> {
    let arbiters = &starter.arbiters;
    let mut started: Vec<Option<Entry>> = vec![None; strategies.len()];
    for (i, strategy) in strategies.iter().enumerate() {
        if started[i].is_some() {
            continue;
        }
        let arbiter = &arbiters[i % arbiters.len()];
        let Some(conversion) = strategy.conversion() else {
            let started_actor = ResourceActor::start(starter.handle(strategy, prefix), arbiter);
            let (actor, handle) = started_actor.await?;
            started[i] = Some(Entry {
                strategy: strategy.clone(),
                actor,
                handle,
                primary: true,
            });
            continue;
        };
        let versions: Vec<usize> = (i..strategies.len())
            .filter(|j| same_type(strategies[*j].as_ref(), strategy.as_ref()))
            .collect();
        let members: Vec<Arc<dyn Strategy>> =
            versions.iter().map(|j| strategies[*j].clone()).collect();
        let handles = members.iter().map(|s| starter.handle(s, prefix)).collect();
        let served = serve_versions(handles, members, conversion, arbiter).await?;
        for (j, entry) in versions.into_iter().zip(served) {
            started[j] = Some(entry);
        }
    }
    Ok(started.into_iter().flatten().collect())
}

/// Where each entry is, by group, version and resource.
fn index(entries: &[Entry]) -> HashMap<(String, String, String), usize> {
    let key = |e: &Entry| {
        let def = e.strategy.def();
        let (g, v, r) = (def.group, def.version, def.resource);
        (g.to_string(), v.to_string(), r.to_string())
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| (key(e), i))
        .collect()
}

/// The same group and resource: versions of one type.
fn same_type(a: &dyn Strategy, b: &dyn Strategy) -> bool {
    a.def().group == b.def().group && a.def().resource == b.def().resource
}

/// Is `strategy` the one its objects are stored through (its own type's
/// only version, or the storage version of several)?
fn stored_as_is(strategy: &dyn Strategy) -> bool {
    strategy
        .conversion()
        .is_none_or(|c| c.storage_version == strategy.def().version)
}

/// The actors of one type's versions (see
/// `ResourceActor::start_versions`), as catalog entries.
async fn serve_versions(
    handles: Vec<Handle>,
    strategies: Vec<Arc<dyn Strategy>>,
    conversion: Conversion,
    arbiter: &actix::ArbiterHandle,
) -> Result<Vec<Entry>, StorageError> {
    let storage = strategies
        .iter()
        .position(|s| s.def().version == conversion.storage_version)
        .unwrap_or(0);
    let arbiters = std::slice::from_ref(arbiter);
    let actors = ResourceActor::start_versions(handles, storage, &conversion, arbiters).await?;
    let entries = strategies.into_iter().zip(actors).enumerate();
    let entries = entries.map(|(i, (strategy, (actor, handle)))| Entry {
        strategy,
        actor,
        handle,
        primary: i == storage,
    });
    Ok(entries.collect())
}
