//! Requests to one resource type: what the routes, the server's own
//! controllers and admission ask of a type. Each runs the generic flow
//! (`flow`) on the type's handle, whose storage is the type's watch cache,
//! on the caller's own task: the cache is shared memory behind locks, so
//! a request needs no hop to the actor owning it. (Sent to the actor, each
//! renewal of a node's Lease crossed two threads more for nothing.)
//! Watches alone start at the actor (`actor::Watch`).

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::flow::{self, Handle, Page, Part, Reply};
use super::options::{DeleteOptions, ListOptions, Query, WriteOptions};
use super::subresource;
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::storage::ReadAt;

/// A request to one type, run with its handle (see
/// `catalog::Entry::call`).
pub trait Request {
    type Output;
    fn run(self, h: &Handle) -> impl Future<Output = Result<Self::Output, ApiError>>;
}

/// One object, always answered from the watch cache.
pub struct Get {
    pub namespace: String,
    pub name: String,
    pub part: Part,
    /// Unset: a consistent read; "0": whatever the cache holds; else not
    /// older than that revision.
    pub resource_version: Option<String>,
}

impl Request for Get {
    type Output = Value;

    async fn run(self, h: &Handle) -> Result<Value, ApiError> {
        let at = match self.resource_version.as_deref() {
            None => ReadAt::Latest,
            Some("0") => ReadAt::Any,
            Some(rv) => ReadAt::NotOlderThan(
                rv.parse()
                    .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?,
            ),
        };
        let key = h.key(&self.namespace, &self.name);
        let found = h.store.get_at(&key, at).await;
        match found.map_err(|e| h.storage_error(&self.name, e))? {
            Some(stored) => Ok(flow::render(h.strategy.as_ref(), stored.object, self.part)),
            None => Err(h.not_found(&self.name)),
        }
    }
}

/// The generic list on the watch cache: from memory at once for
/// `resourceVersion=0`, once the cache is not older than a given
/// revision, or, unset, once it holds the store's current state;
/// continue tokens and exact revisions read the store.
pub struct List {
    pub namespace: Option<String>,
    pub options: ListOptions,
}

impl Request for List {
    type Output = Page;

    async fn run(self, h: &Handle) -> Result<Page, ApiError> {
        flow::list(h, self.namespace.as_deref(), self.options).await
    }
}

pub struct Create {
    pub namespace: String,
    pub body: Value,
    pub options: WriteOptions,
}

impl Request for Create {
    type Output = Reply;

    async fn run(self, h: &Handle) -> Result<Reply, ApiError> {
        flow::create(h, &self.namespace, self.body, self.options).await
    }
}

pub struct Update {
    pub namespace: String,
    pub name: String,
    pub part: Part,
    pub body: Value,
    pub options: WriteOptions,
}

impl Request for Update {
    type Output = Reply;

    async fn run(self, h: &Handle) -> Result<Reply, ApiError> {
        let (namespace, name) = (&self.namespace, &self.name);
        flow::update(h, namespace, name, self.part, self.body, self.options).await
    }
}

pub struct Patch {
    pub namespace: String,
    pub name: String,
    pub part: Part,
    pub kind: PatchType,
    pub patch: Value,
    pub options: WriteOptions,
}

impl Request for Patch {
    type Output = Reply;

    async fn run(self, h: &Handle) -> Result<Reply, ApiError> {
        let (namespace, name, part) = (&self.namespace, &self.name, self.part);
        flow::patch(
            h,
            namespace,
            name,
            part,
            self.kind,
            self.patch,
            self.options,
        )
        .await
    }
}

pub struct Delete {
    pub namespace: String,
    pub name: String,
    pub options: DeleteOptions,
}

impl Request for Delete {
    type Output = Reply;

    async fn run(self, h: &Handle) -> Result<Reply, ApiError> {
        flow::delete(h, &self.namespace, &self.name, self.options).await
    }
}

pub struct DeleteCollection {
    pub namespace: Option<String>,
    pub list: ListOptions,
    pub options: DeleteOptions,
}

impl Request for DeleteCollection {
    type Output = Vec<Value>;

    async fn run(self, h: &Handle) -> Result<Vec<Value>, ApiError> {
        flow::delete_collection(h, self.namespace.as_deref(), self.list, self.options).await
    }
}

/// A request to a subresource its kind serves with its own code (see
/// [`crate::registry::subresource`]).
pub struct SubresourceRequest {
    pub namespace: String,
    pub name: String,
    pub verb: &'static str,
    pub body: Option<Value>,
    pub query: Query,
    /// The query's pairs in order, repeated keys kept.
    pub pairs: Vec<(String, String)>,
    pub options: WriteOptions,
    pub services: Arc<subresource::Services>,
}

/// The kind's code's view of `m`, on the type's storage.
fn call<'a>(h: &'a Handle, m: &'a mut SubresourceRequest) -> subresource::Call<'a> {
    subresource::Call {
        namespace: &m.namespace,
        name: &m.name,
        verb: m.verb,
        body: m.body.take(),
        query: &m.query,
        pairs: &m.pairs,
        options: std::mem::take(&mut m.options),
        store: h.store.as_ref(),
        key: h.key(&m.namespace, &m.name),
        target: h.def().target(&m.name),
        services: &m.services,
        deleter: h,
        admission: h,
    }
}

/// A subresource its kind answers itself (a pod's binding).
pub struct Serve {
    pub handler: &'static dyn subresource::Handler,
    pub request: SubresourceRequest,
}

impl Request for Serve {
    type Output = subresource::Answer;

    async fn run(mut self, h: &Handle) -> Result<subresource::Answer, ApiError> {
        self.handler.serve(call(h, &mut self.request)).await
    }
}

/// A subresource another server answers (a pod's log, exec): where the
/// request goes, once its kind's code has checked and admitted it.
pub struct Locate {
    pub connecter: &'static dyn subresource::Connecter,
    pub request: SubresourceRequest,
}

impl Request for Locate {
    type Output = Option<subresource::Location>;

    async fn run(mut self, h: &Handle) -> Result<Option<subresource::Location>, ApiError> {
        self.connecter.locate(call(h, &mut self.request)).await
    }
}

impl subresource::Deleter for Handle {
    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        options: DeleteOptions,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { flow::delete(self, namespace, name, options).await.map(drop) })
    }
}
