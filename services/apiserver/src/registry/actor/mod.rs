//! The resource actor: one per resource type. It owns the type's watch
//! cache (fed by one store watch on the type's prefix) and answers
//! messages; reads and writes against the store run as futures, so the
//! actor keeps serving while they are in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use super::flow::{self, Handle, Page, Part};
use super::options::ListOptions;
use crate::cache::{Event, EventType, WatchCache, WatchItem, Watcher};
use crate::error::ApiError;
use crate::object::meta;
use crate::storage::{Change, EventStream, Freshness, ListRequest, StorageError, StoreEvent};

/// Events kept for watches that resume from a past revision.
const WINDOW: usize = 4096;
const BOOKMARK_EVERY: Duration = Duration::from_secs(10);
/// The pause before a lost store watch is opened again.
const RESYNC_PAUSE: Duration = Duration::from_millis(200);
/// How often a read at a revision the store has not reached asks again.
const FUTURE_POLL: Duration = Duration::from_millis(100);
/// How long a consistent read waits for the watch cache to catch up with
/// the revision a linearizable read of the store returned.
pub const CATCH_UP: Duration = Duration::from_secs(3);
/// How long a consistent read waits for the store's linearizable answer.
const STORE_READ: Duration = Duration::from_secs(10);

/// A read waiting for the cache to reflect the store's state.
struct Waiter {
    key: String,
    prefix: bool,
    store: Freshness,
    deadline: Instant,
    /// Answers from the cache at the given list revision, or fails.
    respond: Respond,
}

type Respond = Box<dyn FnOnce(&mut ResourceActor, Result<i64, ApiError>)>;

pub struct ResourceActor {
    handle: Handle,
    cache: WatchCache,
    /// Where the store watch was opened, before the first event arrives.
    watch_stream: Option<EventStream>,
    /// The running store watch, to cancel it when it must be replaced.
    stream: Option<SpawnHandle>,
    /// Consistent reads waiting for the cache to catch up.
    waiters: Vec<Waiter>,
}

impl ResourceActor {
    /// Lists the type's prefix, opens the store watch just after that
    /// revision, and starts the actor on `arbiter`.
    pub async fn start(
        handle: Handle,
        arbiter: &actix::ArbiterHandle,
    ) -> Result<Addr<ResourceActor>, StorageError> {
        let (cache, stream) = Self::prime(&handle).await?;
        Ok(ResourceActor::start_in_arbiter(arbiter, move |_| {
            ResourceActor {
                handle,
                cache,
                watch_stream: Some(stream),
                stream: None,
                waiters: Vec::new(),
            }
        }))
    }

    async fn prime(handle: &Handle) -> Result<(WatchCache, EventStream), StorageError> {
        let prefix = handle.collection(None);
        let listing = handle
            .store
            .get_list(&prefix, ListRequest::default())
            .await?;
        let objects = listing
            .items
            .into_iter()
            .map(|s| (key_of(handle, &s.object), s.object));
        let cache = WatchCache::new(objects, listing.revision, WINDOW);
        let stream = open_watch(handle, &prefix, listing.revision + 1).await?;
        Ok((cache, stream))
    }

    /// The cache's form of a store event: a DELETED event carries the
    /// last state at the delete's revision (the cached one if the store
    /// sent no previous state).
    fn event_of(&self, event: StoreEvent) -> Option<Event> {
        let previous = event.previous.map(|p| Arc::new(p.object));
        let (kind, object) = match (event.change, event.object) {
            (Change::Created, Some(stored)) => (EventType::Added, Arc::new(stored.object)),
            (Change::Updated, Some(stored)) => (EventType::Modified, Arc::new(stored.object)),
            (_, _) => {
                let mut last = previous
                    .as_deref()
                    .or_else(|| self.cache.get(&event.key).map(|o| o.as_ref()))
                    .cloned()?;
                meta::set_resource_version(&mut last, event.revision);
                (EventType::Deleted, Arc::new(last))
            }
        };
        Some(Event {
            kind,
            key: event.key,
            object,
            previous,
            revision: event.revision,
        })
    }

    /// The store watch ended (its member went, or the store restarted):
    /// open it again, on whichever member answers, just after the cache's
    /// revision, so the cache's watchers miss nothing and see nothing
    /// twice. When that history is gone (`relist`, or the store says so),
    /// re-list instead: the cache starts over and its watchers are closed,
    /// as they cannot be told what they missed; their clients re-list.
    fn resync(&mut self, ctx: &mut Context<Self>, relist: bool) {
        let (handle, from) = (self.handle.clone(), self.cache.revision() + 1);
        let reopen = async move {
            tokio::time::sleep(RESYNC_PAUSE).await;
            let prefix = handle.collection(None);
            let reopened = match relist {
                true => Err(StorageError::Compacted {
                    requested: from,
                    compacted: None,
                }),
                false => open_watch(&handle, &prefix, from).await,
            };
            match reopened {
                Ok(stream) => Ok(Ok(stream)),
                Err(StorageError::Compacted { .. }) => ResourceActor::prime(&handle).await.map(Err),
                Err(e) => Err(e),
            }
        };
        ctx.spawn(reopen.into_actor(self).map(move |result, actor, ctx| {
            let resource = actor.handle.strategy.def().resource;
            match result {
                Ok(Ok(stream)) => {
                    tracing::info!(resource, from, "store watch resumed");
                    actor.stream = Some(ctx.add_stream(stream));
                }
                Ok(Err((cache, stream))) => {
                    tracing::warn!(
                        resource,
                        from,
                        revision = cache.revision(),
                        "store history compacted; re-listed"
                    );
                    actor.cache = cache;
                    actor.stream = Some(ctx.add_stream(stream));
                    actor.wake_waiters();
                }
                Err(err) => {
                    tracing::warn!(resource, %err, "store watch lost; retrying");
                    actor.resync(ctx, relist);
                }
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

/// The store watch of `prefix` from `from`, on whichever member answers
/// (see `Store::watch`).
async fn open_watch(handle: &Handle, prefix: &str, from: i64) -> Result<EventStream, StorageError> {
    handle.store.watch(prefix, from).await
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

impl StreamHandler<Result<Vec<StoreEvent>, StorageError>> for ResourceActor {
    fn handle(&mut self, item: Result<Vec<StoreEvent>, StorageError>, ctx: &mut Context<Self>) {
        let events = match item {
            Ok(events) => events,
            // A cancelled watch or a broken stream: drop it and open a new
            // one; a compacted one cannot be resumed, so re-list.
            Err(err) => {
                let compacted = matches!(err, StorageError::Compacted { .. });
                if let Some(handle) = self.stream.take() {
                    ctx.cancel_future(handle);
                }
                return self.resync(ctx, compacted);
            }
        };
        // The watch resumes just after the cache's revision; anything at
        // or before it is already in (every event of one revision comes in
        // one batch, so comparing with the revision before it is safe).
        let seen = self.cache.revision();
        for event in events {
            if event.revision <= seen {
                continue;
            }
            if let Some(event) = self.event_of(event) {
                self.cache.apply(event);
            }
        }
        self.wake_waiters();
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        // Only the running watch's end matters: one dropped in `handle` is
        // already being replaced.
        if self.stream.take().is_some() {
            self.resync(ctx, false);
        }
    }
}

pub(super) type Answer<T> = ResponseFuture<Result<T, ApiError>>;

#[derive(Message)]
#[rtype(result = "Result<Value, ApiError>")]
pub struct Get {
    pub namespace: String,
    pub name: String,
    pub part: Part,
    /// Unset: a consistent read; "0": whatever the cache holds; else not
    /// older than that revision. Always answered from the watch cache.
    pub resource_version: Option<String>,
}

impl Handler<Get> for ResourceActor {
    type Result = Answer<Value>;

    fn handle(&mut self, msg: Get, ctx: &mut Context<Self>) -> Self::Result {
        let (name, part) = (msg.name, msg.part);
        let key = self.handle.key(&msg.namespace, &name);
        let read_key = key.clone();
        let answer = move |actor: &mut ResourceActor, _: i64| match actor.cache.get(&key) {
            Some(object) => Ok(flow::render(
                actor.handle.strategy.as_ref(),
                object.as_ref().clone(),
                part,
            )),
            None => Err(actor.handle.not_found(&name)),
        };
        let min = match msg.resource_version.as_deref() {
            Some("0") => {
                let result = answer(self, self.cache.revision());
                return Box::pin(async move { result });
            }
            None => None,
            Some(rv) => match rv.parse() {
                Ok(rv) => Some(rv),
                Err(_) => {
                    let err = ApiError::BadRequest(format!("invalid resource version: {rv}"));
                    return Box::pin(async move { Err(err) });
                }
            },
        };
        self.read_fresh(ctx, read_key, false, min, answer)
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

    /// A continue token, `resourceVersionMatch=Exact`, or a revision with a
    /// limit (the legacy exact form) read the store at that revision;
    /// everything else is answered from the cache: at once for
    /// `resourceVersion=0`, once it is not older than the given revision,
    /// or, unset, once it holds the store's current state.
    fn handle(&mut self, msg: List, ctx: &mut Context<Self>) -> Self::Result {
        let options = msg.options;
        let checked = flow::check_fields(&self.handle, &options).and_then(|_| options.revision());
        let min = match checked {
            Ok(min) => min,
            Err(err) => return Box::pin(async move { Err(err) }),
        };
        let exact = options.continue_token.is_some()
            || options.resource_version_match.as_deref() == Some("Exact")
            || (options.limit > 0 && options.resource_version_match.is_none() && min.is_some());
        if exact {
            let handle = self.handle.clone();
            return Box::pin(async move {
                flow::list(&handle, msg.namespace.as_deref(), options).await
            });
        }
        let prefix = self.handle.collection(msg.namespace.as_deref());
        let any = options.resource_version.as_deref() == Some("0");
        let read_prefix = prefix.clone();
        let answer = move |actor: &mut ResourceActor, revision: i64| {
            Ok(actor.cached_page(&read_prefix, &options, revision))
        };
        if any {
            let page = answer(self, self.cache.revision());
            return Box::pin(async move { page });
        }
        self.read_fresh(ctx, prefix, true, min, answer)
    }
}

impl ResourceActor {
    /// A page of the cached objects under `prefix`, reported at
    /// `revision`; with a limit, the continue token reads the rest from the
    /// store at that revision (the cache holds the store's state there).
    fn cached_page(&self, prefix: &str, options: &ListOptions, revision: i64) -> Page {
        let strategy = self.handle.strategy.as_ref();
        let mut items = Vec::new();
        let mut last = None;
        for (key, object) in self.cache.under(prefix, None) {
            if !flow::matches(strategy, options, object) {
                continue;
            }
            items.push(object.clone());
            if options.limit > 0 && items.len() as i64 >= options.limit {
                last = Some(key.clone());
                break;
            }
        }
        let (mut continue_token, mut remaining) = (None, None);
        if let Some(last) = last {
            let start = format!("{last}\0");
            let rest = self.cache.under(prefix, Some(&start)).count() as i64;
            if rest > 0 {
                continue_token = Some(flow::encode_token(revision, &start));
                remaining =
                    Some(rest).filter(|_| options.labels.is_empty() && options.fields.is_empty());
            }
        }
        Page {
            items,
            revision,
            continue_token,
            remaining,
        }
    }

    /// Runs `answer` against the cache once the cache reflects the store:
    /// at once if `min` is given and already reached; otherwise after a
    /// linearizable read of `key` (or of every key under it, when
    /// `prefix`), as soon as the cache has caught up with what it said,
    /// waiting at most [`CATCH_UP`]. `answer` gets the revision to report.
    fn read_fresh<T: Send + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        key: String,
        prefix: bool,
        min: Option<i64>,
        answer: impl FnOnce(&mut ResourceActor, i64) -> Result<T, ApiError> + 'static,
    ) -> Answer<T> {
        if min.is_some_and(|min| self.cache.revision() >= min) {
            let revision = self.cache.revision();
            let result = answer(self, revision);
            return Box::pin(async move { result });
        }
        let (sender, receiver) = oneshot::channel();
        let respond: Respond = Box::new(move |actor: &mut ResourceActor, revision| {
            let _ = sender.send(revision.and_then(|revision| answer(actor, revision)));
        });
        let read = store_reached(self.handle.clone(), key.clone(), prefix, min);
        ctx.spawn(read.into_actor(self).map(move |result, actor, ctx| {
            let store = match result {
                Ok(store) => store,
                Err(err) => return respond(actor, Err(err)),
            };
            if actor.cache.is_fresh(&key, prefix, &store) {
                let revision = actor.cache.revision().max(store.revision);
                return respond(actor, Ok(revision));
            }
            actor.waiters.push(Waiter {
                key,
                prefix,
                store,
                deadline: Instant::now() + CATCH_UP,
                respond,
            });
            ctx.run_later(CATCH_UP, |actor, _| actor.wake_waiters());
        }));
        Box::pin(async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(ApiError::Internal("the resource actor stopped".into())))
        })
    }

    /// Answers the waiting reads the cache now can, and fails those that
    /// waited too long.
    fn wake_waiters(&mut self) {
        if self.waiters.is_empty() {
            return;
        }
        let now = Instant::now();
        for waiter in std::mem::take(&mut self.waiters) {
            if self
                .cache
                .is_fresh(&waiter.key, waiter.prefix, &waiter.store)
            {
                let revision = self.cache.revision().max(waiter.store.revision);
                (waiter.respond)(self, Ok(revision));
            } else if now >= waiter.deadline {
                let err = ApiError::CacheBehind(format!(
                    "the watch cache of {} did not catch up with the store within {}s: \
                     the store is at revision {}, the cache at {}; try again",
                    self.handle.strategy.def().resource,
                    CATCH_UP.as_secs(),
                    waiter.store.revision,
                    self.cache.revision()
                ));
                (waiter.respond)(self, Err(err));
            } else {
                self.waiters.push(waiter);
            }
        }
    }
}

/// A linearizable read of `key` (or of every key under it) once the store
/// has reached `min`: as kube-apiserver's watch cache, a revision the store
/// has not reached is waited for, up to [`CATCH_UP`], then refused as too
/// large.
async fn store_reached(
    handle: Handle,
    key: String,
    prefix: bool,
    min: Option<i64>,
) -> Result<Freshness, ApiError> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let read = tokio::time::timeout(STORE_READ, handle.store.freshness(&key, prefix)).await;
        let store = match read {
            Ok(Ok(store)) => store,
            Ok(Err(err)) => return Err(handle.storage_error("", err)),
            Err(_) => {
                return Err(ApiError::Unavailable(format!(
                    "store unavailable: no answer to a linearizable read within {}s",
                    STORE_READ.as_secs()
                )))
            }
        };
        match min {
            Some(min) if min > store.revision => {
                if Instant::now() + FUTURE_POLL >= deadline {
                    return Err(ApiError::TooLargeResourceVersion(min, store.revision));
                }
                tokio::time::sleep(FUTURE_POLL).await;
            }
            _ => return Ok(store),
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
    type Result = Answer<mpsc::Receiver<WatchItem>>;

    /// From a given revision: the window's later events, then live ones.
    /// Otherwise (and with `sendInitialEvents`) the current objects as
    /// ADDED first: for `resourceVersion=0` whatever the cache holds; unset,
    /// once the cache holds the store's current state; with a revision,
    /// once it is not older than that.
    fn handle(&mut self, msg: Watch, ctx: &mut Context<Self>) -> Self::Result {
        let checked =
            flow::check_fields(&self.handle, &msg.options).and_then(|_| msg.options.revision());
        let from = match checked {
            Ok(from) => from,
            Err(err) => return Box::pin(async move { Err(err) }),
        };
        let (sender, receiver) = mpsc::channel(crate::cache::WATCHER_BUFFER);
        let strategy = self.handle.strategy.clone();
        let (namespace, options) = (msg.namespace.clone(), msg.options.clone());
        let filter = Box::new(move |o: &Value| {
            namespace
                .as_deref()
                .is_none_or(|ns| meta::namespace(o) == ns)
                && flow::matches(strategy.as_ref(), &options, o)
        });
        let initial = msg.options.send_initial_events || from.is_none();
        let (bookmarks, end_bookmark) = (msg.options.bookmarks, msg.options.send_initial_events);
        let register = move |actor: &mut ResourceActor, revision: i64| {
            let watcher = Watcher {
                sender,
                filter,
                bookmarks,
                // The initial state is the cache's; later events follow it.
                after: if initial {
                    actor.cache.revision()
                } else {
                    from.unwrap_or(0)
                },
            };
            let end = end_bookmark.then(|| actor.bookmark_object(revision, true));
            actor
                .cache
                .watch(watcher, if initial { None } else { from }, end)
                .map(|_| receiver)
        };
        // From a revision the cache has reached, or "0": at once. From one
        // it has not: once it has (see `read_fresh`), or 504.
        let reached = !initial && from.is_some_and(|rv| rv <= self.cache.revision());
        if reached || msg.options.resource_version.as_deref() == Some("0") {
            let result = register(self, self.cache.revision());
            return Box::pin(async move { result });
        }
        let prefix = self.handle.collection(msg.namespace.as_deref());
        self.read_fresh(ctx, prefix, true, from, register)
    }
}

mod writes;

pub use writes::*;
