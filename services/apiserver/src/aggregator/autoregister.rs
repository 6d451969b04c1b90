//! The Local APIServices (kube's autoregister and CRD registration
//! controllers): one per group/version this server serves itself, so
//! `kubectl get apiservices` lists them as kube-apiserver's does. The
//! built-in ones are made at start (labelled `onstart`); those of
//! custom resources come and go with their definitions (labelled
//! `true`). Existing ones are left as they are.

use std::collections::HashSet;

use serde_json::Value;

use super::registration::local_apiservice;
use crate::error::ApiError;
use crate::registry::catalog::Entry;
use crate::registry::kinds::apiregistration::{GROUP, RESOURCE};
use crate::registry::options::{DeleteOptions, WriteOptions};
use crate::registry::requests;
use crate::registry::Catalog;

const MANAGER: &str = "kube-apiserver";
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

fn apiservices(catalog: &Catalog) -> Result<&Entry, ApiError> {
    catalog
        .find(GROUP, "v1", RESOURCE)
        .ok_or_else(|| ApiError::Internal("apiservices are not served".into()))
}

/// Creates the missing Local APIServices of `served` (group, version),
/// labelled `automanaged`.
async fn create(entry: &Entry, served: &[(&str, &str)], automanaged: &str) -> Result<(), ApiError> {
    for (group, version) in served {
        let mut body = local_apiservice(group, version);
        body["metadata"]["labels"][AUTOMANAGED] = automanaged.into();
        let create = requests::Create {
            namespace: String::new(),
            body,
            options: WriteOptions::by(MANAGER),
        };
        match entry.call(create).await {
            Ok(_) | Err(ApiError::AlreadyExists(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// At start: the Local APIServices of the built-in groups.
pub async fn ensure_local(catalog: &Catalog, served: &[(&str, &str)]) -> Result<(), ApiError> {
    create(apiservices(catalog)?, served, "onstart").await
}

/// After start: those of the custom resources' groups served now
/// (besides `fixed`, the ones served without a catalog entry), and the
/// removal of those whose custom resources are no longer served.
/// `existing` is every APIService stored.
pub async fn sync(
    catalog: &Catalog,
    fixed: &[(&'static str, &'static str)],
    existing: &[Value],
) -> Result<(), ApiError> {
    let entry = apiservices(catalog)?;
    let mut served = catalog.groups();
    served.extend(fixed.iter().copied());
    let names: HashSet<&str> = existing
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    let missing: Vec<(&str, &str)> = served
        .iter()
        .copied()
        .filter(|(g, v)| !names.contains(format!("{v}.{g}").as_str()))
        .collect();
    create(entry, &missing, "true").await?;
    for obj in existing.iter().filter(|o| is_stale(o, &served)) {
        let delete = requests::Delete {
            namespace: String::new(),
            name: obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
            options: DeleteOptions::default(),
        };
        match entry.call(delete).await {
            Ok(_) | Err(ApiError::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// A Local APIService made for custom resources that are not served
/// any more.
fn is_stale(obj: &Value, served: &[(&str, &str)]) -> bool {
    let spec = &obj["spec"];
    let local = !spec["service"].is_object();
    let ours = obj["metadata"]["labels"][AUTOMANAGED] == "true";
    let group = spec["group"].as_str().unwrap_or("");
    let version = spec["version"].as_str().unwrap_or("");
    local && ours && !served.contains(&(group, version))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_automanaged_local_apiservices_of_unserved_groups_are_stale() {
        let served = [("apps", "v1")];
        let crd = |group: &str, label: &str| {
            json!({"metadata": {"name": format!("v1.{group}"), "labels": {AUTOMANAGED: label}},
                   "spec": {"group": group, "version": "v1"}})
        };
        assert!(is_stale(&crd("example.com", "true"), &served));
        assert!(!is_stale(&crd("apps", "true"), &served));
        assert!(!is_stale(&crd("example.com", "onstart"), &served));
        let mut remote = crd("example.com", "true");
        remote["spec"]["service"] = json!({"namespace": "a", "name": "b"});
        assert!(!is_stale(&remote, &served));
    }
}
