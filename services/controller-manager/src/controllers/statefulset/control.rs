//! The StatefulSet controller's writes, each with kube's event on the
//! set: pods created and deleted by name, claims created before the pod
//! that mounts them (owned by the set when whenDeleted is Delete), and a
//! condemned pod made the owner of its claims when whenScaled is Delete,
//! so the garbage collector takes them with it.

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::Resource;

use super::identity::{claim_templates, claims_for, set_name};
use crate::error::{Error, Result};

/// Writes pods and claims for StatefulSets.
#[derive(Clone)]
pub struct SetControl {
    pub client: kube::Client,
    pub recorder: EventRecorder,
    pub claims: Store<PersistentVolumeClaim>,
}

/// kube's persistentVolumeClaimRetentionPolicy values.
fn retention(set: &StatefulSet) -> (bool, bool) {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let deletes = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    (
        deletes(policy.and_then(|p| p.when_deleted.as_ref())),
        deletes(policy.and_then(|p| p.when_scaled.as_ref())),
    )
}

/// A plain (not controller) owner reference, as kube puts on claims.
fn owner_of<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        controller: None,
        ..crate::ownership::controller_ref(owner)
    }
}

impl SetControl {
    /// kube's event for a write about `what` (`Pod web-0`).
    fn event(&self, set: &StatefulSet, verb: &str, what: &str, failure: Option<&Error>) {
        let name = set_name(set);
        let (reason, event_type, message) = match failure {
            None => (
                if verb == "create" {
                    "SuccessfulCreate"
                } else {
                    "SuccessfulDelete"
                },
                EventType::Normal,
                format!("{verb} {what} in StatefulSet {name} successful"),
            ),
            Some(err) => (
                if verb == "create" {
                    "FailedCreate"
                } else {
                    "FailedDelete"
                },
                EventType::Warning,
                format!(
                    "{verb} {what} in StatefulSet {name} failed error: {}",
                    err.api_message()
                ),
            ),
        };
        self.recorder.record(set, event_type, reason, message);
    }

    /// Creates the claims the pod with `ordinal` mounts that do not exist.
    pub async fn create_claims(
        &self,
        set: &StatefulSet,
        ordinal: i32,
        pod_name: &str,
    ) -> Result<()> {
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let (when_deleted, _) = retention(set);
        for mut claim in claims_for(set, ordinal) {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if let Some(existing) = self.claims.get(Some(namespace), &name) {
                if existing.metadata.deletion_timestamp.is_some() {
                    return Err(Error::Invalid(format!("pvc {name} is being deleted")));
                }
                continue;
            }
            if when_deleted {
                claim.metadata.owner_references = Some(vec![owner_of(set)]);
            }
            let what = format!("Claim {name} Pod {pod_name}");
            match api
                .create(&PostParams::default(), &claim)
                .await
                .map_err(Error::from)
            {
                Ok(_) => self.event(set, "create", &what, None),
                Err(err) if err.is_already_exists() => {}
                Err(err) => {
                    self.event(set, "create", &what, Some(&err));
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Creates `pod`: true if created, false if one by its name is
    /// already there (the cache was behind).
    pub async fn create_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<bool> {
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let what = format!("Pod {name}");
        match api
            .create(&PostParams::default(), pod)
            .await
            .map_err(Error::from)
        {
            Ok(_) => {
                self.event(set, "create", &what, None);
                Ok(true)
            }
            Err(err) if err.is_already_exists() => Ok(false),
            Err(err) => {
                if !err.is_namespace_terminating() {
                    self.event(set, "create", &what, Some(&err));
                }
                Err(err)
            }
        }
    }

    /// Deletes the pod if it still has its UID.
    pub async fn delete_pod(&self, set: &StatefulSet, pod: &Pod) -> Result<()> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let what = format!("Pod {name}");
        match api.delete(name, &params).await.map_err(Error::from) {
            Ok(_) => {
                self.event(set, "delete", &what, None);
                Ok(())
            }
            Err(err) if err.is_not_found() || err.is_conflict() => Ok(()),
            Err(err) => {
                self.event(set, "delete", &what, Some(&err));
                Err(err)
            }
        }
    }

    /// Under whenScaled: Delete, the condemned pod owns its claims.
    pub async fn hand_claims_to(&self, set: &StatefulSet, ordinal: i32, pod: &Pod) -> Result<()> {
        if !retention(set).1 || claim_templates(set).is_empty() {
            return Ok(());
        }
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let reference = owner_of(pod);
        for claim in claims_for(set, ordinal) {
            let name = claim.metadata.name.unwrap_or_default();
            let Some(cached) = self.claims.get(Some(namespace), &name) else {
                continue;
            };
            let mut claim = (*cached).clone();
            let references = claim.metadata.owner_references.get_or_insert_with(Vec::new);
            if references.iter().any(|r| r.uid == reference.uid) {
                continue;
            }
            references.push(reference.clone());
            match api
                .replace(&name, &PostParams::default(), &claim)
                .await
                .map_err(Error::from)
            {
                Ok(_) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}
