//! The Local APIServices (kube's autoregister controller, at start): one
//! per group/version this server serves itself, so `kubectl get
//! apiservices` lists them as kube-apiserver's does. Existing ones are
//! left as they are.

use super::registration::local_apiservice;
use crate::error::ApiError;
use crate::registry::actor;
use crate::registry::kinds::apiservice::{GROUP, RESOURCE};
use crate::registry::options::WriteOptions;
use crate::registry::Catalog;

const MANAGER: &str = "kube-apiserver";

/// Creates the missing Local APIServices of `served` (group, version).
pub async fn ensure_local(catalog: &Catalog, served: &[(&str, &str)]) -> Result<(), ApiError> {
    let entry = catalog
        .find(GROUP, "v1", RESOURCE)
        .ok_or_else(|| ApiError::Internal("apiservices are not served".into()))?;
    for (group, version) in served {
        let create = actor::Create {
            namespace: String::new(),
            body: local_apiservice(group, version),
            options: WriteOptions::by(MANAGER),
        };
        match entry.actor.send(create).await {
            Ok(Ok(_)) | Ok(Err(ApiError::AlreadyExists(_))) => {}
            Ok(Err(err)) => return Err(err),
            Err(err) => return Err(ApiError::Internal(err.to_string())),
        }
    }
    Ok(())
}
