//! Writing an object's status the way kube's controllers do: a PUT of the
//! `status` subresource (what their roles grant: `update` on
//! `<resource>/status`), conditional on the resourceVersion the
//! controller read; on a conflict the object is read again and the status
//! applied once more to the fresh copy.

use std::fmt::Debug;

use kube::api::{Api, PostParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// Sets the status with `apply` on `object` and writes it; once more on
/// a fresh read if the write conflicts. A deleted object is not an error.
pub async fn update_status<K>(api: &Api<K>, object: &K, apply: impl Fn(&mut K)) -> Result<Option<K>>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let mut current = object.clone();
    for attempt in 0..2 {
        apply(&mut current);
        let body = serde_json::to_vec(&current).map_err(|e| Error::Invalid(e.to_string()))?;
        match api
            .replace_status(&name, &PostParams::default(), body)
            .await
        {
            Ok(written) => return Ok(Some(written)),
            Err(err) => {
                let err = Error::from(err);
                if err.is_not_found() {
                    return Ok(None);
                }
                if !err.is_conflict() || attempt == 1 {
                    return Err(err);
                }
            }
        }
        match api.get_opt(&name).await? {
            Some(fresh) => current = fresh,
            None => return Ok(None),
        }
    }
    Ok(None)
}
