//! The resource actor's writes: each runs the generic flow as a future
//! on the actor's handle, so the actor keeps serving while it is in flight.

use std::sync::Arc;

use actix::prelude::*;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{Answer, ResourceActor};
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::registry::flow::{self, Part, Reply};
use crate::registry::options::{DeleteOptions, ListOptions, Query, WriteOptions};
use crate::registry::subresource;

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
        Box::pin(
            async move { flow::update(&h, &m.namespace, &m.name, m.part, m.body, m.options).await },
        )
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

/// The kind's code's view of `m`, on the actor's storage.
fn call<'a>(h: &'a flow::Handle, m: &'a mut SubresourceRequest) -> subresource::Call<'a> {
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
#[derive(Message)]
#[rtype(result = "Result<subresource::Answer, ApiError>")]
pub struct Serve {
    pub handler: &'static dyn subresource::Handler,
    pub request: SubresourceRequest,
}

impl Handler<Serve> for ResourceActor {
    type Result = Answer<subresource::Answer>;

    fn handle(&mut self, mut m: Serve, _: &mut Context<Self>) -> Self::Result {
        let h = self.handle.clone();
        Box::pin(async move { m.handler.serve(call(&h, &mut m.request)).await })
    }
}

/// A subresource another server answers (a pod's log, exec): where the
/// request goes, once its kind's code has checked and admitted it.
#[derive(Message)]
#[rtype(result = "Result<Option<subresource::Location>, ApiError>")]
pub struct Locate {
    pub connecter: &'static dyn subresource::Connecter,
    pub request: SubresourceRequest,
}

impl Handler<Locate> for ResourceActor {
    type Result = Answer<Option<subresource::Location>>;

    fn handle(&mut self, mut m: Locate, _: &mut Context<Self>) -> Self::Result {
        let h = self.handle.clone();
        Box::pin(async move { m.connecter.locate(call(&h, &mut m.request)).await })
    }
}

impl subresource::Deleter for flow::Handle {
    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        options: DeleteOptions,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move { flow::delete(self, namespace, name, options).await.map(drop) })
    }
}
