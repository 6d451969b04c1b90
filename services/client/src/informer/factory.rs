//! The per-process factory: one informer per (type, namespace,
//! selectors), started on first request and shared by every later one.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject};
use kube::core::NamespaceResourceScope;
use kube::runtime::watcher;
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use super::transform::{strip_for_cache, TransformFn};
use super::{reflect, Informer};

/// Selectors for one informer's list and watch. Informers of one type
/// with different options (or namespaces) are separate watches with
/// separate caches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InformerOptions {
    /// A label selector for the list and watch (`app=web,tier!=db`).
    pub label_selector: Option<String>,
    /// A field selector (`spec.nodeName=n1`, `status.phase!=Succeeded`).
    pub field_selector: Option<String>,
}

impl InformerOptions {
    /// Only objects matching `selector`'s labels.
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// Only objects matching `selector`'s fields.
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_string());
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    api_version: String,
    plural: String,
    namespace: Option<String>,
    options: InformerOptions,
}

impl InformerKey {
    /// The key of the informer on `K` in `namespace` (all if None) that
    /// `options` picks.
    fn of<K: Resource + 'static>(
        dyntype: &K::DynamicType,
        namespace: Option<&str>,
        options: InformerOptions,
    ) -> InformerKey {
        InformerKey {
            type_id: TypeId::of::<K>(),
            api_version: K::api_version(dyntype).into_owned(),
            plural: K::plural(dyntype).into_owned(),
            namespace: namespace.map(str::to_string),
            options,
        }
    }
}

/// The process's informers. Clones share them; [`Informers::shutdown`]
/// (or dropping every clone) stops their watches.
#[derive(Clone)]
pub struct Informers {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: kube::Client,
    informers: Mutex<HashMap<InformerKey, Box<dyn Any + Send + Sync>>>,
    transforms: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    synced: Mutex<Vec<tokio::sync::watch::Receiver<bool>>>,
    stop: CancellationToken,
}

impl Drop for FactoryInner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Informers {
    /// A factory whose informers list and watch through `client`.
    pub fn new(client: kube::Client) -> Informers {
        Informers {
            inner: Arc::new(FactoryInner {
                client,
                informers: Mutex::new(HashMap::new()),
                transforms: Mutex::new(HashMap::new()),
                synced: Mutex::new(Vec::new()),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// The client the informers use.
    pub fn client(&self) -> &kube::Client {
        &self.inner.client
    }

    /// The shared informer on every object of type `K`, started on first
    /// request. Must be called inside a tokio runtime.
    pub fn get<K>(&self) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.get_with(InformerOptions::default())
    }

    /// The shared informer on the objects of type `K` (in every
    /// namespace) that `options` picks.
    pub fn get_with<K>(&self, options: InformerOptions) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let api = Api::all(self.inner.client.clone());
        self.informer(api, &(), None, options)
    }

    /// The shared informer on the objects of namespaced type `K` in one
    /// namespace that `options` picks.
    pub fn get_namespaced<K>(&self, namespace: &str, options: InformerOptions) -> Informer<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let api = Api::namespaced(self.inner.client.clone(), namespace);
        self.informer(api, &(), Some(namespace), options)
    }

    /// The shared informer on a type known only at run time (a custom
    /// resource, or every type for the garbage collector), in one
    /// namespace or all.
    pub fn get_dynamic(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        options: InformerOptions,
    ) -> Informer<DynamicObject> {
        let client = self.inner.client.clone();
        let api = match namespace {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        self.informer(api, resource, namespace, options)
    }

    /// Runs `transform` on every `K` before it is cached, after the
    /// default (which drops `managedFields` and the last-applied
    /// annotation). Applies to informers of `K` created after the call.
    pub fn set_transform<K: Resource + 'static>(
        &self,
        transform: impl Fn(&mut K) + Send + Sync + 'static,
    ) {
        let transform: TransformFn<K> = Arc::new(transform);
        self.inner
            .transforms
            .lock()
            .insert(TypeId::of::<K>(), Box::new(transform));
    }

    /// Makes `informer`, from another factory, this factory's informer on
    /// every `K`: later `get::<K>()` calls return it rather than starting
    /// a watch. Its watch, cache and transform stay the other factory's;
    /// handlers added through this factory end when it shuts down. Lets
    /// components in one process (an embedded controller manager, whose
    /// factory lasts one leadership term, and scheduler) keep one cache of
    /// every pod rather than one each.
    pub fn adopt<K>(&self, informer: &Informer<K>)
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = InformerKey::of::<K>(&(), None, InformerOptions::default());
        let adopted = Informer {
            shared: informer.shared.clone(),
            owner: self.inner.stop.clone(),
        };
        self.inner
            .synced
            .lock()
            .push(adopted.shared.synced.subscribe());
        self.inner.informers.lock().insert(key, Box::new(adopted));
    }

    /// Resolves once every informer created so far has its first listing.
    pub async fn wait_synced(&self) {
        let receivers = self.inner.synced.lock().clone();
        for mut synced in receivers {
            let _ = synced.wait_for(|s| *s).await;
        }
    }

    /// Stops every informer's watch. Their caches stay readable.
    pub fn shutdown(&self) {
        self.inner.stop.cancel();
    }

    fn informer<K>(
        &self,
        api: Api<K>,
        dyntype: &K::DynamicType,
        namespace: Option<&str>,
        options: InformerOptions,
    ) -> Informer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync + 'static,
    {
        let key = InformerKey::of::<K>(dyntype, namespace, options.clone());
        let mut informers = self.inner.informers.lock();
        if let Some(existing) = informers.get(&key) {
            if let Some(informer) = existing.downcast_ref::<Informer<K>>() {
                return informer.clone();
            }
        }
        let resource = match K::group(dyntype).as_ref() {
            "" => K::plural(dyntype).into_owned(),
            group => format!("{group}/{}", K::plural(dyntype)),
        };
        let informer = Informer {
            shared: Arc::new(Shared::new(&resource)),
            owner: self.inner.stop.clone(),
        };
        self.inner
            .synced
            .lock()
            .push(informer.shared.synced.subscribe());
        tokio::spawn(reflect::run(
            api,
            watcher_config(&options),
            informer.shared.clone(),
            self.transform::<K>(),
            self.inner.stop.child_token(),
        ));
        informers.insert(key, Box::new(informer.clone()));
        informer
    }

    fn transform<K: Resource + 'static>(&self) -> TransformFn<K> {
        let extra = self
            .inner
            .transforms
            .lock()
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<TransformFn<K>>())
            .cloned();
        Arc::new(move |object: &mut K| {
            strip_for_cache(object);
            if let Some(extra) = &extra {
                extra(object);
            }
        })
    }
}

fn watcher_config(options: &InformerOptions) -> watcher::Config {
    watcher::Config {
        label_selector: options.label_selector.clone(),
        field_selector: options.field_selector.clone(),
        ..watcher::Config::default()
    }
}
