//! The server's own reads and writes of RBAC objects (bootstrap
//! reconciliation, aggregation), sent to the kinds' resource actors like
//! any request, so every rule of the generic flow applies. They carry no
//! requester: the server itself is trusted, as kube's loopback client is.

use actix::dev::ToEnvelope;
use actix::{Handler, Message};
use serde_json::Value;

use super::objects::{Kind, GROUP, VERSION};
use crate::error::ApiError;
use crate::registry::actor::{self, ResourceActor};
use crate::registry::flow::Part;
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::registry::Catalog;

async fn send<M>(catalog: &Catalog, kind: Kind, message: M) -> Result<M::Result, ApiError>
where
    M: Message + Send + 'static,
    M::Result: Send,
    ResourceActor: Handler<M>,
    <ResourceActor as actix::Actor>::Context: ToEnvelope<ResourceActor, M>,
{
    let entry = catalog
        .find(GROUP, VERSION, kind.resource())
        .ok_or_else(|| ApiError::Internal(format!("{} are not served", kind.resource())))?;
    entry
        .actor
        .send(message)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// The object `namespace/name` (an empty namespace for cluster objects),
/// or None.
pub async fn get(
    catalog: &Catalog,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    let message = actor::Get {
        namespace: namespace.to_string(),
        name: name.to_string(),
        part: Part::Main,
        resource_version: None,
    };
    match send(catalog, kind, message).await? {
        Ok(obj) => Ok(Some(obj)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Creates `body` in the namespace it names (none for cluster objects).
pub async fn create(catalog: &Catalog, kind: Kind, body: Value, by: &str) -> Result<(), ApiError> {
    let message = actor::Create {
        namespace: crate::object::meta::namespace(&body).to_string(),
        body,
        options: WriteOptions::by(by),
    };
    send(catalog, kind, message).await?.map(|_| ())
}

/// Replaces the object `body` names, if it is still at the
/// resourceVersion `body` carries.
pub async fn update(catalog: &Catalog, kind: Kind, body: Value, by: &str) -> Result<(), ApiError> {
    let message = actor::Update {
        namespace: crate::object::meta::namespace(&body).to_string(),
        name: crate::object::meta::name(&body).to_string(),
        part: Part::Main,
        body,
        options: WriteOptions::by(by),
    };
    send(catalog, kind, message).await?.map(|_| ())
}

pub async fn delete(
    catalog: &Catalog,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let message = actor::Delete {
        namespace: namespace.to_string(),
        name: name.to_string(),
        options: DeleteOptions::default(),
    };
    send(catalog, kind, message).await?.map(|_| ())
}
