//! The server's own reads and writes of RBAC objects (bootstrap
//! reconciliation, aggregation), run on the kinds' handles like any
//! request, so every rule of the generic flow applies. They carry no
//! requester: the server itself is trusted, as kube's loopback client is.

use serde_json::Value;

use super::objects::{Kind, GROUP, VERSION};
use crate::error::ApiError;
use crate::registry::flow::Part;
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::registry::requests::{self, Request};
use crate::registry::Catalog;

async fn send<R: Request>(
    catalog: &Catalog,
    kind: Kind,
    request: R,
) -> Result<R::Output, ApiError> {
    let entry = catalog
        .find(GROUP, VERSION, kind.resource())
        .ok_or_else(|| ApiError::Internal(format!("{} are not served", kind.resource())))?;
    entry.call(request).await
}

/// The object `namespace/name` (an empty namespace for cluster objects),
/// or None.
pub async fn get(
    catalog: &Catalog,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    let message = requests::Get {
        namespace: namespace.to_string(),
        name: name.to_string(),
        part: Part::Main,
        resource_version: None,
    };
    match send(catalog, kind, message).await {
        Ok(obj) => Ok(Some(obj)),
        Err(ApiError::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Creates `body` in the namespace it names (none for cluster objects).
pub async fn create(catalog: &Catalog, kind: Kind, body: Value, by: &str) -> Result<(), ApiError> {
    let message = requests::Create {
        namespace: crate::object::meta::namespace(&body).to_string(),
        body,
        options: WriteOptions::by(by),
    };
    send(catalog, kind, message).await.map(drop)
}

/// Replaces the object `body` names, if it is still at the
/// resourceVersion `body` carries.
pub async fn update(catalog: &Catalog, kind: Kind, body: Value, by: &str) -> Result<(), ApiError> {
    let message = requests::Update {
        namespace: crate::object::meta::namespace(&body).to_string(),
        name: crate::object::meta::name(&body).to_string(),
        part: Part::Main,
        body,
        options: WriteOptions::by(by),
    };
    send(catalog, kind, message).await.map(drop)
}

pub async fn delete(
    catalog: &Catalog,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let message = requests::Delete {
        namespace: namespace.to_string(),
        name: name.to_string(),
        options: DeleteOptions::default(),
    };
    send(catalog, kind, message).await.map(drop)
}
