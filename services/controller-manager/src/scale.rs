//! Scale subresources of any workload, as kube's scale client reaches
//! them: the four built-in kinds are known, anything else (a custom
//! resource with a scale subresource) is looked up once by discovery.
//! The autoscaler scales through it and the disruption controller reads
//! a pod owner's desired count from it.

use std::collections::HashMap;

use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Resolves kinds to resources, remembering what discovery said.
#[derive(Default)]
pub struct Scales {
    known: Mutex<HashMap<(String, String), ApiResource>>,
}

/// The built-in kinds with a scale subresource.
fn built_in(api_version: &str, kind: &str) -> Option<ApiResource> {
    let plural = match (api_version, kind) {
        ("apps/v1", "Deployment") => "deployments",
        ("apps/v1", "ReplicaSet") => "replicasets",
        ("apps/v1", "StatefulSet") => "statefulsets",
        ("v1", "ReplicationController") => "replicationcontrollers",
        _ => return None,
    };
    let gvk = gvk(api_version, kind);
    Some(ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

impl Scales {
    /// The resource serving `kind` of `api_version`.
    pub async fn resource(
        &self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<ApiResource> {
        if let Some(resource) = built_in(api_version, kind) {
            return Ok(resource);
        }
        let key = (api_version.to_string(), kind.to_string());
        if let Some(resource) = self.known.lock().get(&key) {
            return Ok(resource.clone());
        }
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk(api_version, kind))
            .await
            .map_err(|e| {
                Error::Invalid(format!(
                    "no matches for kind \"{kind}\" in group \"{api_version}\": {e}"
                ))
            })?;
        self.known.lock().insert(key, resource.clone());
        Ok(resource)
    }

    fn api(client: &kube::Client, namespace: &str, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, resource)
    }

    /// The Scale of `name`.
    pub async fn get(
        &self,
        client: &kube::Client,
        namespace: &str,
        (api_version, kind): (&str, &str),
        name: &str,
    ) -> Result<Scale> {
        let resource = self.resource(client, api_version, kind).await?;
        Ok(Self::api(client, namespace, &resource)
            .get_scale(name)
            .await?)
    }

    /// Writes `scale` back with `replicas` (a conflict if it changed since read).
    pub async fn set_replicas(
        &self,
        client: &kube::Client,
        (api_version, kind): (&str, &str),
        mut scale: Scale,
        replicas: i32,
    ) -> Result<Scale> {
        let resource = self.resource(client, api_version, kind).await?;
        let namespace = scale.metadata.namespace.clone().unwrap_or_default();
        let name = scale.metadata.name.clone().unwrap_or_default();
        scale.spec.get_or_insert_with(Default::default).replicas = Some(replicas);
        let body = serde_json::to_vec(&scale).map_err(|e| Error::Invalid(e.to_string()))?;
        let api = Self::api(client, &namespace, &resource);
        Ok(api
            .replace_scale(&name, &PostParams::default(), body)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_need_no_discovery() {
        let deployments = built_in("apps/v1", "Deployment").unwrap();
        assert_eq!(
            (deployments.group.as_str(), deployments.plural.as_str()),
            ("apps", "deployments")
        );
        let rcs = built_in("v1", "ReplicationController").unwrap();
        assert_eq!((rcs.group.as_str(), rcs.version.as_str()), ("", "v1"));
        assert!(built_in("example.com/v1", "Widget").is_none());
    }
}
