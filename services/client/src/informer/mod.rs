//! Shared informers, client-go's in Rust: one list-and-watch per resource
//! type per process, however many controllers ask, feeding a cache
//! ([`Store`]) and event handlers.
//!
//! The watching itself is kube-runtime's `watcher`: it lists, watches
//! from the list's resourceVersion, resumes after a dropped connection,
//! relists on 410 Gone and uses bookmarks. On each (re)list the informer
//! swaps in the fresh listing and dispatches the differences against the
//! old cache, as client-go's `Replace` does: `Added` for new objects,
//! `Updated` for changed ones, `Deleted` (with the last known state) for
//! objects that vanished while the watch was down.
//!
//! ```no_run
//! # async fn doc(client: kube::Client) {
//! use capstan_client::informer::{indexes, InformerEvent, Informers};
//! use capstan_client::queue::WorkQueue;
//! use k8s_openapi::api::core::v1::Pod;
//!
//! let informers = Informers::new(client);
//! let pods = informers.get::<Pod>();
//! pods.add_index(indexes::BY_NODE_NAME, indexes::pod_node_name);
//! let queue = WorkQueue::<String>::new("example");
//! let q = queue.clone();
//! pods.add_handler(move |event: &InformerEvent<Pod>| q.add(event.key()));
//! pods.wait_synced().await;
//! let on_n1 = pods.store().by_index(indexes::BY_NODE_NAME, "n1");
//! # }
//! ```

mod factory;
pub mod indexes;
mod metrics;
mod pod_transform;
mod reflect;
mod shared;
mod store;
mod transform;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Resource;
use tokio_util::sync::CancellationToken;

pub use factory::{InformerOptions, Informers};
pub use pod_transform::{
    strip_container_statuses, strip_pod_mounts_and_security, strip_pod_runtime_details,
};
pub use store::{key_from, key_of, IndexFn, Store, BY_NAMESPACE};
pub use transform::{strip_for_cache, TransformFn, LAST_APPLIED};

use shared::Shared;

/// A change an informer saw, after its cache took it.
#[derive(Debug)]
pub enum InformerEvent<K> {
    /// A new object (or one already cached when the handler was added).
    Added(Arc<K>),
    /// An object changed: its previous and new cached states.
    Updated {
        /// The state cached before.
        old: Arc<K>,
        /// The state cached now.
        new: Arc<K>,
    },
    /// An object was deleted: the state the watch reported, or the last
    /// one cached if it vanished during a relist.
    Deleted(Arc<K>),
}

impl<K: Resource> InformerEvent<K> {
    /// The object as it is now (or was last, for a deletion).
    pub fn object(&self) -> &Arc<K> {
        match self {
            InformerEvent::Added(o) | InformerEvent::Deleted(o) => o,
            InformerEvent::Updated { new, .. } => new,
        }
    }

    /// The object's `namespace/name` key.
    pub fn key(&self) -> String {
        key_of(self.object().as_ref())
    }
}

/// Identifies a handler for [`Informer::remove_handler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HandlerId(u64);

/// One shared informer, as the factory it came from hands it out. Clones
/// share it.
pub struct Informer<K> {
    shared: Arc<Shared<K>>,
    /// The stop of the factory this handle came from: handlers added
    /// through it end when that factory shuts down.
    owner: CancellationToken,
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            shared: self.shared.clone(),
            owner: self.owner.clone(),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Informer<K> {
    /// The cache.
    pub fn store(&self) -> Store<K> {
        self.shared.store.clone()
    }

    /// Calls `handler` for every change from now on, and at once with an
    /// `Added` for each object already cached (so a late handler misses
    /// nothing). Handlers run on the informer's task, in order, after the
    /// cache took the change: keep them short (put a key on a queue) and
    /// never call back into this informer's `add_handler` from one.
    /// The handler ends when the factory this handle came from shuts down.
    pub fn add_handler(
        &self,
        handler: impl Fn(&InformerEvent<K>) + Send + Sync + 'static,
    ) -> HandlerId {
        self.shared
            .add_handler(Arc::new(handler), self.owner.clone())
    }

    /// Stops calling a handler.
    pub fn remove_handler(&self, id: HandlerId) {
        self.shared.remove_handler(id);
    }

    /// Adds a named index (cached objects are filed at once).
    pub fn add_index(&self, name: &str, index: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) {
        self.shared.store.add_index(name, Arc::new(index));
    }

    /// Resolves once the first listing is cached.
    pub async fn wait_synced(&self) {
        let mut synced = self.shared.synced.subscribe();
        // The sender lives in `shared`, which we hold: this cannot fail.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Whether the first listing is cached.
    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }
}

/// Any informer, as far as waiting for its first listing goes: lets a
/// controller wait for informers of different types in one call.
pub trait Syncable: Send + Sync {
    /// Resolves once the first listing is cached.
    fn synced(&self) -> BoxFuture<'_, ()>;
}

impl<K: Resource + Send + Sync + 'static> Syncable for Informer<K> {
    fn synced(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_synced())
    }
}

/// Resolves once every one of `informers` has its first listing.
pub async fn all_synced(informers: &[&dyn Syncable]) {
    for informer in informers {
        informer.synced().await;
    }
}

#[cfg(test)]
mod tests;
