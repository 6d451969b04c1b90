//! `NamespaceLifecycle`: nothing new goes into a namespace that is being
//! deleted or does not exist, and the system namespaces cannot be
//! deleted. The namespace is looked up in the watch cache first and, when
//! the cache has not seen it (it may be brand new), in the store, as
//! kube's plugin falls back to a live lookup.

use std::sync::Arc;

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects, NAMESPACES};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};

/// The namespaces every cluster has, which may not be deleted.
pub const IMMORTAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

pub struct NamespaceLifecycle {
    objects: Arc<dyn Objects>,
}

const NAME: &str = "NamespaceLifecycle";

impl NamespaceLifecycle {
    pub fn new(objects: Arc<dyn Objects>) -> NamespaceLifecycle {
        NamespaceLifecycle { objects }
    }

    async fn namespace(&self, name: &str) -> Result<Option<Value>, AdmissionError> {
        let cached = self.objects.get(NAMESPACES, "", name, Freshness::Cached);
        if let Some(found) = cached.await? {
            return Ok(Some(found));
        }
        let current = self.objects.get(NAMESPACES, "", name, Freshness::Current);
        Ok(current.await?)
    }

    async fn check_create(&self, namespace: &str) -> Result<(), AdmissionError> {
        let Some(found) = self.namespace(namespace).await? else {
            return Err(AdmissionError::NotFound {
                resource: "namespaces".into(),
                name: namespace.into(),
            });
        };
        let terminating = found["status"]["phase"] == "Terminating"
            || !found["metadata"]["deletionTimestamp"].is_null();
        match terminating {
            true => Err(AdmissionError::denied(
                NAME,
                format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ),
            )),
            false => Ok(()),
        }
    }
}

impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &str {
        NAME
    }

    /// kube's plugin is a mutating one, so a create into a going
    /// namespace stops here, before the other plugins' lookups.
    fn mutate<'a>(&'a self, a: &'a Attributes<'a>, _: &'a mut Value) -> Admit<'a> {
        Box::pin(async move {
            let is_namespace = a.group.is_empty() && a.resource == "namespaces";
            // Cluster-scoped objects, namespaces themselves, and anything
            // but a create (updates and deletes let a namespace empty out).
            if a.namespace.is_empty() || is_namespace || a.operation != Operation::Create {
                return Ok(());
            }
            self.check_create(a.namespace).await
        })
    }

    /// Deletes have no mutating step: the system namespaces are kept here.
    fn validate<'a>(&'a self, a: &'a Attributes<'a>, _: Option<&'a Value>) -> Admit<'a> {
        let is_namespace = a.group.is_empty() && a.resource == "namespaces";
        let immortal = is_namespace
            && a.operation == Operation::Delete
            && IMMORTAL_NAMESPACES.contains(&a.name);
        Box::pin(async move {
            match immortal {
                true => Err(AdmissionError::denied(
                    NAME,
                    "this namespace may not be deleted",
                )),
                false => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{attributes, Memory};
    use super::*;
    use crate::auth::UserInfo;

    fn plugin() -> NamespaceLifecycle {
        let objects = Memory::default();
        objects.put(
            NAMESPACES,
            json!({"metadata": {"name": "live"}, "status": {"phase": "Active"}}),
        );
        objects.put(
            NAMESPACES,
            json!({"metadata": {"name": "going", "deletionTimestamp": "2026-01-01T00:00:00Z"},
                   "status": {"phase": "Terminating"}}),
        );
        NamespaceLifecycle::new(Arc::new(objects))
    }

    #[tokio::test]
    async fn creates_need_a_live_namespace() {
        let plugin = plugin();
        let user = UserInfo::anonymous();
        let create = |ns| attributes(Operation::Create, "pods", ns, "p", &user);
        let mut pod = serde_json::json!({});
        assert_eq!(plugin.mutate(&create("live"), &mut pod).await, Ok(()));
        let going = plugin.mutate(&create("going"), &mut pod).await.unwrap_err();
        assert_eq!(
            going,
            AdmissionError::denied(
                NAME,
                "unable to create new content in namespace going because it is being terminated"
            )
        );
        let missing = plugin
            .mutate(&create("nowhere"), &mut pod)
            .await
            .unwrap_err();
        assert_eq!(missing.to_string(), "namespaces \"nowhere\" not found");
        // Updates and deletes in a terminating namespace go on.
        let update = attributes(Operation::Update, "pods", "going", "p", &user);
        assert_eq!(plugin.mutate(&update, &mut pod).await, Ok(()));
    }

    #[tokio::test]
    async fn system_namespaces_cannot_be_deleted() {
        let plugin = plugin();
        let user = UserInfo::anonymous();
        for name in IMMORTAL_NAMESPACES {
            let delete = attributes(Operation::Delete, "namespaces", "", name, &user);
            let refused = plugin.validate(&delete, None).await.unwrap_err();
            assert_eq!(
                refused,
                AdmissionError::denied(NAME, "this namespace may not be deleted")
            );
        }
        let delete = attributes(Operation::Delete, "namespaces", "", "live", &user);
        assert_eq!(plugin.validate(&delete, None).await, Ok(()));
    }
}
