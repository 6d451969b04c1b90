//! The resource actor: one per resource type. It owns the type's Cacher
//! (`cache::Cacher`, the watch cache in front of the store, fed by one
//! store watch on the type's prefix) and keeps it fed, sends its
//! bookmarks and starts its watches. Its handle's storage is that Cacher,
//! so the generic flow reads from memory what it may and writes through
//! to the store without knowing which it talks to; the catalog lends the
//! handle, and reads and writes run with it where they are asked
//! (`registry::requests`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::json;
use tokio::sync::mpsc;

use super::conversion::{self, Conversion, Converted};
use super::flow::{self, Handle};
use super::options::ListOptions;
use crate::cache::{Cacher, Filter, WatchItem, WatchRequest};
use crate::error::ApiError;
use crate::storage::{Object, ReadAt, StorageError};

const BOOKMARK_EVERY: Duration = Duration::from_secs(10);

pub use crate::cache::CATCH_UP;

type Feed = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct ResourceActor {
    handle: Handle,
    cacher: Arc<Cacher>,
    /// What keeps the cache current, until the actor runs it.
    feed: Option<Feed>,
    /// The actor whose feed keeps the cache sends its bookmarks.
    owns_cache: bool,
    /// For one version of a type served in several: the handle's
    /// storage, which converts watch items too.
    view: Option<Converted>,
}

impl ResourceActor {
    /// Fills the type's Cacher from the store behind `handle`, and starts
    /// the actor on `arbiter` with the Cacher as its handle's storage:
    /// the actor's address, and that handle.
    pub async fn start(
        mut handle: Handle,
        arbiter: &actix::ArbiterHandle,
    ) -> Result<(Addr<ResourceActor>, Handle), StorageError> {
        let prefix = handle.collection(None);
        let fields = handle.strategy.selectable_fields();
        let (cacher, feed) = Cacher::start(handle.store.clone(), prefix, fields).await?;
        handle.store = cacher.clone();
        let feed: Feed = Box::pin(feed);
        let served = handle.clone();
        let actor = ResourceActor::start_in_arbiter(arbiter, move |_| ResourceActor {
            handle,
            cacher,
            feed: Some(feed),
            owns_cache: true,
            view: None,
        });
        Ok((actor, served))
    }

    /// Serves one type in several versions: one Cacher, filled and fed
    /// through `handles[owner]` (the storage version's, when served), and
    /// an actor per version whose storage is the Cacher converted to its
    /// version (see `registry::conversion`), writing `conversion`'s
    /// storage version. The actors and their handles, in the order of
    /// `handles`; stopping the owner stops the cache.
    pub async fn start_versions(
        handles: Vec<Handle>,
        owner: usize,
        conversion: &Conversion,
        arbiters: &[actix::ArbiterHandle],
    ) -> Result<Vec<(Addr<ResourceActor>, Handle)>, StorageError> {
        let storage = owner;
        let converter = conversion.converter.clone();
        let owner = &handles[owner];
        let prefix = owner.collection(None);
        let fields = owner.strategy.selectable_fields();
        let stored_as = match owner.def().group {
            "" => conversion.storage_version.to_string(),
            group => format!("{group}/{}", conversion.storage_version),
        };
        let (cacher, feed) = Cacher::start(owner.store.clone(), prefix, fields).await?;
        let mut feed: Option<Feed> = Some(Box::pin(feed));
        let mut actors = Vec::new();
        for (i, mut handle) in handles.into_iter().enumerate() {
            let view = Converted::new(
                cacher.clone(),
                converter.clone(),
                handle.def().api_version(),
                stored_as.clone(),
                handle.strategy.selectable_fields(),
            );
            handle.store = Arc::new(view.clone());
            let feed = if i == storage { feed.take() } else { None };
            let cacher = cacher.clone();
            let arbiter = &arbiters[i % arbiters.len()];
            let served = handle.clone();
            let actor = ResourceActor::start_in_arbiter(arbiter, move |_| ResourceActor {
                handle,
                cacher,
                owns_cache: feed.is_some(),
                feed,
                view: Some(view),
            });
            actors.push((actor, served));
        }
        Ok(actors)
    }
}

/// A BOOKMARK's object: only the kind and the revision.
fn bookmark_object(handle: &Handle, revision: i64, initial_end: bool) -> Object {
    let def = handle.strategy.def();
    let mut metadata = json!({});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let value = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata});
    Object::new("", value, revision, &[])
}

impl Actor for ResourceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(feed) = self.feed.take() {
            // Runs as long as the actor does, on its arbiter.
            ctx.spawn(actix::fut::wrap_future(feed));
        }
        if !self.owns_cache {
            return;
        }
        ctx.run_interval(BOOKMARK_EVERY, |actor, _| {
            let handle = &actor.handle;
            actor
                .cacher
                .bookmark(|rv| bookmark_object(handle, rv, false));
        });
    }
}

#[derive(Message)]
#[rtype(result = "Result<mpsc::Receiver<WatchItem>, ApiError>")]
pub struct Watch {
    pub namespace: Option<String>,
    pub options: ListOptions,
}

impl Handler<Watch> for ResourceActor {
    type Result = ResponseFuture<Result<mpsc::Receiver<WatchItem>, ApiError>>;

    /// From a given revision: the window's later events, then live ones.
    /// Otherwise (and with `sendInitialEvents`) the current objects as
    /// ADDED first: for `resourceVersion=0` whatever the cache holds; unset,
    /// once the cache holds the store's current state; with a revision,
    /// once it is not older than that.
    fn handle(&mut self, msg: Watch, _: &mut Context<Self>) -> Self::Result {
        let checked =
            flow::check_fields(&self.handle, &msg.options).and_then(|_| msg.options.revision());
        let from = match checked {
            Ok(from) => from,
            Err(err) => return Box::pin(async move { Err(err) }),
        };
        let at = match (msg.options.resource_version.as_deref(), from) {
            (Some("0"), _) => ReadAt::Any,
            (_, Some(rv)) => ReadAt::NotOlderThan(rv),
            _ => ReadAt::Latest,
        };
        let h = self.handle.clone();
        let end_handle = h.clone();
        let request = WatchRequest {
            at,
            initial: msg.options.send_initial_events,
            filter: watch_filter(&h, msg.namespace, msg.options.clone()),
            bookmarks: msg.options.bookmarks,
            end_bookmark: match msg.options.send_initial_events {
                true => Some(Box::new(move |rv| bookmark_object(&end_handle, rv, true))),
                false => None,
            },
        };
        let cacher = self.cacher.clone();
        let view = self.view.clone();
        Box::pin(async move {
            let items = cacher.watch_objects(request).await;
            items
                .map(|items| match view {
                    Some(view) => conversion::convert_items(items, view),
                    None => items,
                })
                .map_err(|err| match err {
                    StorageError::Compacted {
                        requested,
                        compacted: Some(oldest),
                    } => ApiError::Expired(format!(
                        "too old resource version: {requested} ({oldest})"
                    )),
                    other => h.storage_error("", other),
                })
        })
    }
}

/// Which objects a watch wants: its namespace's, matching its selectors.
fn watch_filter(h: &Handle, namespace: Option<String>, options: ListOptions) -> Filter {
    let strategy = h.strategy.clone();
    Box::new(move |o: &Object| {
        namespace.as_deref().is_none_or(|ns| o.namespace() == ns)
            && flow::matches(strategy.as_ref(), &options, o)
    })
}

/// Stops the actor and its cache's store watch (a type no longer served,
/// or served by a new actor), after [`RETIREMENT`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

/// How long a replaced actor goes on answering. A request that found it in
/// the catalog just before the swap still reaches it, and is served with
/// the storage it started with, as kube-apiserver lets in-flight requests
/// finish on a CRD's old storage. Stopped at once, the actor closed its
/// mailbox under such a request: a 500 "Mailbox has closed" for a create
/// sent while a CRD's storage version changed.
const RETIREMENT: Duration = Duration::from_secs(5);

impl Handler<Stop> for ResourceActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.run_later(RETIREMENT, |_, ctx| ctx.stop());
    }
}
