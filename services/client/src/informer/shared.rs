//! The state an informer's task and its users share: the cache, the
//! handlers, the synced flag. Changes are applied to the cache and
//! dispatched to handlers under one lock, so a handler added at any
//! moment sees each object exactly once as `Added` and every later change.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::metrics::InformerMetrics;
use super::store::{key_of, Store};
use super::{HandlerId, InformerEvent};

pub(super) type Handler<K> = Arc<dyn Fn(&InformerEvent<K>) + Send + Sync>;

/// A handler and what it lives for: the factory it was added through. A
/// handler whose factory has shut down is never called again, so a
/// controller manager's term can end while the informer it borrowed
/// (see [`Informers::adopt`](super::Informers::adopt)) goes on.
struct Registered<K> {
    id: HandlerId,
    owner: CancellationToken,
    handler: Handler<K>,
}

pub(super) struct Shared<K> {
    pub(super) store: Store<K>,
    handlers: Mutex<Vec<Registered<K>>>,
    next_id: AtomicU64,
    pub(super) synced: watch::Sender<bool>,
    metrics: InformerMetrics,
}

impl<K: Resource + Send + Sync + 'static> Shared<K> {
    pub(super) fn new(resource: &str) -> Shared<K> {
        Shared {
            store: Store::new(),
            handlers: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            synced: watch::Sender::new(false),
            metrics: InformerMetrics::new(resource),
        }
    }

    pub(super) fn add_handler(&self, handler: Handler<K>, owner: CancellationToken) -> HandlerId {
        let id = HandlerId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let mut handlers = self.handlers.lock();
        for object in self.store.list() {
            handler(&InformerEvent::Added(object));
        }
        handlers.push(Registered { id, owner, handler });
        id
    }

    pub(super) fn remove_handler(&self, id: HandlerId) {
        self.handlers.lock().retain(|h| h.id != id);
    }

    /// The live handlers, locked; those whose factory stopped are dropped.
    fn live_handlers(&self) -> parking_lot::MutexGuard<'_, Vec<Registered<K>>> {
        let mut handlers = self.handlers.lock();
        handlers.retain(|h| !h.owner.is_cancelled());
        handlers
    }

    fn dispatch(handlers: &[Registered<K>], event: &InformerEvent<K>) {
        for registered in handlers {
            (registered.handler)(event);
        }
    }

    /// An object added or changed, from the watch.
    pub(super) fn apply(&self, object: K) {
        let object = Arc::new(object);
        let handlers = self.live_handlers();
        let old = self.store.insert(key_of(object.as_ref()), object.clone());
        let event = match old {
            None => {
                self.metrics.added();
                InformerEvent::Added(object)
            }
            Some(old) if same_version(old.as_ref(), object.as_ref()) => return,
            Some(old) => {
                self.metrics.updated();
                InformerEvent::Updated { old, new: object }
            }
        };
        self.metrics.objects(self.store.len());
        Self::dispatch(&handlers, &event);
    }

    /// An object deleted, from the watch (its final state).
    pub(super) fn delete(&self, object: K) {
        let handlers = self.live_handlers();
        let key = key_of(&object);
        let resource_version = object.meta().resource_version.clone();
        self.store.remove(&key, resource_version);
        self.metrics.deleted();
        self.metrics.objects(self.store.len());
        Self::dispatch(&handlers, &InformerEvent::Deleted(Arc::new(object)));
    }

    /// A complete (re)listing: swap it in and dispatch the differences.
    pub(super) fn replace(
        &self,
        listed: HashMap<String, Arc<K>>,
        resource_version: Option<String>,
    ) {
        let handlers = self.live_handlers();
        let mut old = self.store.replace(listed.clone(), resource_version);
        for (key, object) in listed {
            match old.remove(&key) {
                None => {
                    self.metrics.added();
                    Self::dispatch(&handlers, &InformerEvent::Added(object));
                }
                Some(previous) if same_version(previous.as_ref(), object.as_ref()) => {}
                Some(previous) => {
                    self.metrics.updated();
                    Self::dispatch(
                        &handlers,
                        &InformerEvent::Updated {
                            old: previous,
                            new: object,
                        },
                    );
                }
            }
        }
        for (_, vanished) in old {
            self.metrics.deleted();
            Self::dispatch(&handlers, &InformerEvent::Deleted(vanished));
        }
        self.metrics.objects(self.store.len());
        drop(handlers);
        self.synced.send_replace(true);
    }

    pub(super) fn relisted(&self) {
        self.metrics.relisted();
    }

    pub(super) fn failed(&self) {
        self.metrics.failed();
    }
}

fn same_version<K: Resource>(a: &K, b: &K) -> bool {
    let (a, b) = (&a.meta().resource_version, &b.meta().resource_version);
    a.is_some() && a == b
}
