//! The resource actor: one per resource type. It owns the type's watch
//! cache (fed by one store watch on the type's prefix) and answers
//! messages; reads and writes against the store run as futures, so the
//! actor keeps serving while they are in flight.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use etcd_client::{EventType as StoreEventType, WatchOptions, WatchResponse};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::flow::{self, Handle, Page, Part, Reply};
use super::options::{DeleteOptions, ListOptions, WriteOptions};
use crate::cache::{Event, EventType, WatchCache, WatchItem, Watcher};
use crate::error::ApiError;
use crate::object::meta;
use crate::object::patch::PatchType;
use crate::storage::StorageError;

/// Events kept for watches that resume from a past revision.
const WINDOW: usize = 4096;
const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

pub struct ResourceActor {
    handle: Handle,
    client: etcd_client::Client,
    cache: WatchCache,
    /// Where the store watch was opened, before the first event arrives.
    watch_stream: Option<etcd_client::WatchStream>,
    /// The running store watch, to cancel it when it must be replaced.
    stream: Option<SpawnHandle>,
}

impl ResourceActor {
    /// Lists the type's prefix, opens the store watch just after that
    /// revision, and starts the actor on `arbiter`.
    pub async fn start(
        handle: Handle,
        client: etcd_client::Client,
        arbiter: &actix::ArbiterHandle,
    ) -> Result<Addr<ResourceActor>, StorageError> {
        let (cache, stream) = Self::prime(&handle, &client).await?;
        Ok(ResourceActor::start_in_arbiter(arbiter, move |_| {
            ResourceActor {
                handle,
                client,
                cache,
                watch_stream: Some(stream),
                stream: None,
            }
        }))
    }

    async fn prime(
        handle: &Handle,
        client: &etcd_client::Client,
    ) -> Result<(WatchCache, etcd_client::WatchStream), StorageError> {
        let prefix = handle.collection(None);
        let listing = handle.store.list(&prefix, None, 0, 0).await?;
        let objects = listing
            .items
            .into_iter()
            .map(|s| (key_of(handle, &s.object), s.object));
        let cache = WatchCache::new(objects, listing.revision, WINDOW);
        let stream = open_watch(client, &prefix, listing.revision + 1).await?;
        Ok((cache, stream))
    }

    fn event_of(&self, event: &etcd_client::Event) -> Option<Event> {
        let kv = event.kv()?;
        let key = String::from_utf8_lossy(kv.key()).to_string();
        let previous = event
            .prev_kv()
            .and_then(|p| crate::storage::decode(&key, p.value(), p.mod_revision()).ok());
        let previous = previous.map(|p| Arc::new(p.object));
        let (kind, object) = match event.event_type() {
            StoreEventType::Put => {
                let stored = crate::storage::decode(&key, kv.value(), kv.mod_revision()).ok()?;
                let kind = if kv.create_revision() == kv.mod_revision() {
                    EventType::Added
                } else {
                    EventType::Modified
                };
                (kind, Arc::new(stored.object))
            }
            StoreEventType::Delete => {
                // A DELETED event carries the last state at the delete's revision.
                let mut last = previous.as_deref().cloned()?;
                meta::set_resource_version(&mut last, kv.mod_revision());
                (EventType::Deleted, Arc::new(last))
            }
        };
        Some(Event {
            kind,
            key,
            object,
            previous,
            revision: kv.mod_revision(),
        })
    }

    /// The store watch ended (store restart, compaction): open it again
    /// after the cache's revision, or re-list when that history is gone.
    fn resync(&mut self, ctx: &mut Context<Self>) {
        let (handle, client, from) = (
            self.handle.clone(),
            self.client.clone(),
            self.cache.revision() + 1,
        );
        let reopen = async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let prefix = handle.collection(None);
            match open_watch(&client, &prefix, from).await {
                Ok(stream) => Ok(Ok(stream)),
                Err(StorageError::Compacted(_)) => {
                    ResourceActor::prime(&handle, &client).await.map(Err)
                }
                Err(e) => Err(e),
            }
        };
        ctx.spawn(reopen.into_actor(self).map(|result, actor, ctx| match result {
            Ok(Ok(stream)) => {
                actor.stream = Some(ctx.add_stream(stream));
            }
            Ok(Err((cache, stream))) => {
                actor.cache = cache;
                actor.stream = Some(ctx.add_stream(stream));
            }
            Err(err) => {
                tracing::warn!(resource = actor.handle.strategy.def().resource, %err, "store watch lost; retrying");
                actor.resync(ctx);
            }
        }));
    }

    fn bookmark_object(&self, revision: i64, initial_end: bool) -> Value {
        let def = self.handle.strategy.def();
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata})
    }
}

fn key_of(handle: &Handle, obj: &Value) -> String {
    handle.key(meta::namespace(obj), meta::name(obj))
}

async fn open_watch(
    client: &etcd_client::Client,
    prefix: &str,
    from: i64,
) -> Result<etcd_client::WatchStream, StorageError> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(from);
    Ok(client.watch_client().watch(prefix, Some(options)).await?)
}

impl Actor for ResourceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(stream) = self.watch_stream.take() {
            self.stream = Some(ctx.add_stream(stream));
        }
        ctx.run_interval(BOOKMARK_EVERY, |actor, _| {
            actor.cache.prune();
            let (kind, api_version) = (actor.handle.strategy.def().kind, actor.handle.strategy.def().api_version());
            actor.cache.bookmark(|rv| json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": rv.to_string()}}));
        });
    }
}

impl StreamHandler<Result<WatchResponse, etcd_client::Error>> for ResourceActor {
    fn handle(&mut self, item: Result<WatchResponse, etcd_client::Error>, ctx: &mut Context<Self>) {
        let response = match item {
            Ok(response) if !response.canceled() && response.compact_revision() == 0 => response,
            // A cancelled watch (compaction) or a broken stream: drop it
            // and open a new one.
            Ok(_) | Err(_) => {
                if let Some(handle) = self.stream.take() {
                    ctx.cancel_future(handle);
                }
                return self.resync(ctx);
            }
        };
        for event in response.events() {
            if let Some(event) = self.event_of(event) {
                self.cache.apply(event);
            }
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        self.stream = None;
        self.resync(ctx);
    }
}

type Answer<T> = ResponseFuture<Result<T, ApiError>>;

#[derive(Message)]
#[rtype(result = "Result<Value, ApiError>")]
pub struct Get {
    pub namespace: String,
    pub name: String,
    pub part: Part,
}

impl Handler<Get> for ResourceActor {
    type Result = Answer<Value>;

    fn handle(&mut self, msg: Get, _: &mut Context<Self>) -> Self::Result {
        let handle = self.handle.clone();
        Box::pin(async move { flow::get(&handle, &msg.namespace, &msg.name, msg.part).await })
    }
}

#[derive(Message)]
#[rtype(result = "Result<Page, ApiError>")]
pub struct List {
    pub namespace: Option<String>,
    pub options: ListOptions,
}

impl Handler<List> for ResourceActor {
    type Result = Answer<Page>;

    /// `resourceVersion=0` (any) is answered from the cache; everything
    /// else is a consistent or exact read from the store.
    fn handle(&mut self, msg: List, _: &mut Context<Self>) -> Self::Result {
        let from_cache = msg.options.resource_version.as_deref() == Some("0")
            && msg.options.continue_token.is_none()
            && msg.options.limit == 0;
        if from_cache {
            let page = flow::check_fields(&self.handle, &msg.options)
                .map(|_| self.cached_page(msg.namespace.as_deref(), &msg.options));
            return Box::pin(async move { page });
        }
        let handle = self.handle.clone();
        Box::pin(async move { flow::list(&handle, msg.namespace.as_deref(), msg.options).await })
    }
}

impl ResourceActor {
    fn cached_page(&self, namespace: Option<&str>, options: &ListOptions) -> Page {
        let strategy = self.handle.strategy.as_ref();
        let items = self
            .cache
            .objects()
            .filter(|o| namespace.is_none_or(|ns| meta::namespace(o) == ns))
            .filter(|o| flow::matches(strategy, options, o))
            .map(|o| o.as_ref().clone())
            .collect();
        Page {
            items,
            revision: self.cache.revision(),
            continue_token: None,
            remaining: None,
        }
    }
}

#[derive(Message)]
#[rtype(result = "Result<mpsc::Receiver<WatchItem>, ApiError>")]
pub struct Watch {
    pub namespace: Option<String>,
    pub options: ListOptions,
}

impl Handler<Watch> for ResourceActor {
    type Result = Result<mpsc::Receiver<WatchItem>, ApiError>;

    fn handle(&mut self, msg: Watch, _: &mut Context<Self>) -> Self::Result {
        flow::check_fields(&self.handle, &msg.options)?;
        let (sender, receiver) = mpsc::channel(crate::cache::WATCHER_BUFFER);
        let strategy = self.handle.strategy.clone();
        let (namespace, options) = (msg.namespace, msg.options.clone());
        let filter = Box::new(move |o: &Value| {
            namespace
                .as_deref()
                .is_none_or(|ns| meta::namespace(o) == ns)
                && flow::matches(strategy.as_ref(), &options, o)
        });
        let from = msg.options.revision()?;
        let after = from.unwrap_or(self.cache.revision());
        let end = msg
            .options
            .send_initial_events
            .then(|| self.bookmark_object(self.cache.revision(), true));
        let watcher = Watcher {
            sender,
            filter,
            bookmarks: msg.options.bookmarks,
            after,
        };
        // sendInitialEvents replays state even from a given revision.
        let from = if msg.options.send_initial_events {
            None
        } else {
            from
        };
        self.cache.watch(watcher, from, end)?;
        Ok(receiver)
    }
}

pub use messages::*;

mod messages {
    use super::*;

    #[derive(Message)]
    #[rtype(result = "Result<Reply, ApiError>")]
    pub struct Create {
        pub namespace: String,
        pub body: Value,
        pub options: WriteOptions,
    }

    impl Handler<Create> for ResourceActor {
        type Result = Answer<Reply>;

        fn handle(&mut self, m: Create, _: &mut Context<Self>) -> Self::Result {
            let h = self.handle.clone();
            Box::pin(async move { flow::create(&h, &m.namespace, m.body, m.options).await })
        }
    }

    #[derive(Message)]
    #[rtype(result = "Result<Reply, ApiError>")]
    pub struct Update {
        pub namespace: String,
        pub name: String,
        pub part: Part,
        pub body: Value,
        pub options: WriteOptions,
    }

    impl Handler<Update> for ResourceActor {
        type Result = Answer<Reply>;

        fn handle(&mut self, m: Update, _: &mut Context<Self>) -> Self::Result {
            let h = self.handle.clone();
            Box::pin(async move {
                flow::update(&h, &m.namespace, &m.name, m.part, m.body, m.options).await
            })
        }
    }

    #[derive(Message)]
    #[rtype(result = "Result<Reply, ApiError>")]
    pub struct Patch {
        pub namespace: String,
        pub name: String,
        pub part: Part,
        pub kind: PatchType,
        pub patch: Value,
        pub options: WriteOptions,
    }

    impl Handler<Patch> for ResourceActor {
        type Result = Answer<Reply>;

        fn handle(&mut self, m: Patch, _: &mut Context<Self>) -> Self::Result {
            let h = self.handle.clone();
            Box::pin(async move {
                flow::patch(
                    &h,
                    &m.namespace,
                    &m.name,
                    m.part,
                    m.kind,
                    m.patch,
                    m.options,
                )
                .await
            })
        }
    }

    #[derive(Message)]
    #[rtype(result = "Result<Reply, ApiError>")]
    pub struct Delete {
        pub namespace: String,
        pub name: String,
        pub options: DeleteOptions,
    }

    impl Handler<Delete> for ResourceActor {
        type Result = Answer<Reply>;

        fn handle(&mut self, m: Delete, _: &mut Context<Self>) -> Self::Result {
            let h = self.handle.clone();
            Box::pin(async move { flow::delete(&h, &m.namespace, &m.name, m.options).await })
        }
    }

    #[derive(Message)]
    #[rtype(result = "Result<Vec<Value>, ApiError>")]
    pub struct DeleteCollection {
        pub namespace: Option<String>,
        pub list: ListOptions,
        pub options: DeleteOptions,
    }

    impl Handler<DeleteCollection> for ResourceActor {
        type Result = Answer<Vec<Value>>;

        fn handle(&mut self, m: DeleteCollection, _: &mut Context<Self>) -> Self::Result {
            let h = self.handle.clone();
            Box::pin(async move {
                flow::delete_collection(&h, m.namespace.as_deref(), m.list, m.options).await
            })
        }
    }
}
