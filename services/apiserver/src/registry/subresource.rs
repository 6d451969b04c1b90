//! Subresources as data. A kind lists what it serves below its objects in
//! its [`ResourceDef`](super::ResourceDef)'s `subresources` table: the
//! name, the verbs, what it answers with, and who serves it. The routes
//! dispatch on that table and the discovery documents are written from
//! it, so neither names a kind. `/status` and `/scale` are parts of the
//! object that the generic flow reads and writes; every other subresource
//! is the kind's own code, a [`Handler`] in the kind's folder (a pod's
//! `binding`, a service account's `token`).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::options::{DeleteOptions, Query, WriteOptions};
use crate::admission::objects::Objects;
use crate::error::{ApiError, Target};
use crate::serviceaccount::Issuer;
use crate::storage::Interface;

/// One entry of a kind's table.
#[derive(Clone, Copy)]
pub struct Subresource {
    pub name: &'static str,
    /// The kind of what it answers with, when not the object's own.
    pub response: Option<ResponseKind>,
    /// The verbs it takes, as discovery lists them.
    pub verbs: &'static [&'static str],
    pub serve: Serve,
    /// An older collection of the kind's group that serves it too, with
    /// the object named in the body (`bindings` for `pods/binding`).
    pub collection: Option<&'static str>,
}

impl std::fmt::Debug for Subresource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A kind other than the object's, as discovery names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponseKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

/// Who serves a subresource.
#[derive(Clone, Copy)]
pub enum Serve {
    /// The object's `.status`: the generic flow reads and writes it alone.
    Status,
    /// The autoscaling/v1 Scale of the object's replicas.
    Scale,
    /// The kind's code, given the request's body (kube's `rest.Creater`:
    /// binding, token, eviction).
    Create(&'static dyn Handler),
    /// The kind's code, given the request's query alone (kube's
    /// `rest.Connecter`: log, exec, attach, portforward, proxy): it says
    /// where the request goes, and the gateway carries the bytes there.
    Connect(&'static dyn Connecter),
}

pub const STATUS: Subresource = Subresource {
    name: "status",
    response: None,
    verbs: &["get", "patch", "update"],
    serve: Serve::Status,
    collection: None,
};

pub const SCALE: Subresource = Subresource {
    name: "scale",
    response: Some(ResponseKind {
        group: "autoscaling",
        version: "v1",
        kind: "Scale",
    }),
    verbs: &["get", "patch", "update"],
    serve: Serve::Scale,
    collection: None,
};

pub const STATUS_AND_SCALE: &[Subresource] = &[STATUS, SCALE];

/// A subresource served by its kind's own code.
pub trait Handler: Send + Sync {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>>;
}

/// A subresource that another server answers (kube's `rest.Connecter`):
/// the kind's code checks the request against the object, admits it, and
/// says where it goes.
pub trait Connecter: Send + Sync {
    /// None: there is nothing to connect to, and the answer is empty (a
    /// log of a pod no node has taken yet, as kube answers it).
    fn locate<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Option<Location>, ApiError>>;
}

/// Where a connect request goes: a path on the kubelet of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The node whose kubelet serves it.
    pub node: String,
    /// Path and query on the kubelet.
    pub path: String,
    /// An upgraded connection (exec, attach, portforward) rather than a
    /// streamed answer (log).
    pub upgrade: bool,
    /// The request asked not to verify the kubelet's serving certificate
    /// (`insecureSkipTLSVerifyBackend` of a log request).
    pub insecure: bool,
}

/// One request to a subresource of one object, checked against the
/// table (its verb is listed, it names the object).
pub struct Call<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// As discovery spells it: `get`, `create`.
    pub verb: &'a str,
    /// The decoded body of a [`Serve::Create`] subresource; None for
    /// [`Serve::Connect`].
    pub body: Option<Value>,
    pub query: &'a Query,
    /// The query's pairs in their order, repeated keys kept (an exec's
    /// `command`, one argument each).
    pub pairs: &'a [(String, String)],
    /// Who asks, and whether it is a dry run.
    pub options: WriteOptions,
    /// The kind's storage (its watch cache in front of the store), and
    /// the object's key in it.
    pub store: &'a dyn Interface,
    pub key: String,
    /// Names the object in errors.
    pub target: Target,
    pub services: &'a Services,
    /// Deletes an object of the kind through the generic flow (graceful
    /// deletion, finalizers, admission), as a DELETE request would.
    pub deleter: &'a dyn Deleter,
    /// The admission chain of the object's kind, for a handler that writes.
    pub admission: &'a dyn Admission,
}

/// The generic flow's delete, for subresources that end in one (a pod's
/// `eviction`); the flow implements it, so this table need not know it.
pub trait Deleter: Send + Sync {
    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        options: DeleteOptions,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
}

impl Call<'_> {
    /// `body` as admission sees it: typed `api_version`/`kind` and named
    /// and placed like the object the request names, whatever the client
    /// left out.
    pub fn admissible(&self, mut body: Value, api_version: &str, kind: &str) -> Value {
        if !body.is_object() {
            body = Value::Object(Default::default());
        }
        body["apiVersion"] = api_version.into();
        body["kind"] = kind.into();
        let metadata = crate::object::meta::metadata_mut(&mut body);
        metadata.insert("name".into(), self.name.into());
        if !self.namespace.is_empty() {
            metadata.insert("namespace".into(), self.namespace.into());
        }
        body
    }

    /// Admits `object` (the request's body, such as a Binding) as a
    /// CREATE of `subresource` on the named object, as kube admits every
    /// `rest.Creater`: webhooks, policies and plugins see it and may
    /// change or refuse it.
    pub async fn admit_create(
        &self,
        subresource: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        let write = self.write(subresource);
        self.admission.admit_create(write, object).await
    }

    fn write<'s>(&'s self, subresource: &'s str) -> SubresourceWrite<'s> {
        SubresourceWrite {
            namespace: self.namespace,
            name: self.name,
            subresource,
            options: &self.options,
        }
    }

    /// Admits `options` (a PodExecOptions, ...) as a CONNECT of
    /// `subresource` on the named object, as kube admits every
    /// `rest.Connecter`: webhooks and policies matching CONNECT see it
    /// and may refuse it.
    pub async fn admit_connect(
        &self,
        subresource: &str,
        options: &mut Value,
    ) -> Result<(), ApiError> {
        let write = self.write(subresource);
        self.admission.admit_connect(write, options).await
    }
}

/// Who writes which subresource of which object.
pub struct SubresourceWrite<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub subresource: &'a str,
    pub options: &'a WriteOptions,
}

/// Admission for the kind's own subresource code (the generic flow's
/// chain, behind a trait so this table knows nothing of the flow).
pub trait Admission: Send + Sync {
    /// Every mutating then every validating step on `object`.
    fn admit_create<'a>(
        &'a self,
        write: SubresourceWrite<'a>,
        object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>>;

    /// The same steps for a CONNECT, on the request's options object.
    fn admit_connect<'a>(
        &'a self,
        write: SubresourceWrite<'a>,
        options: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// A successful answer: the HTTP code and the body.
#[derive(Debug)]
pub struct Answer {
    pub code: u16,
    pub body: Value,
}

/// What a kind's subresource code may use beyond its own kind.
pub struct Services {
    /// Other kinds' objects (the lookups admission uses).
    pub objects: Arc<dyn Objects>,
    /// Issues service-account tokens, when this server signs them.
    pub issuer: Option<Arc<Issuer>>,
}
