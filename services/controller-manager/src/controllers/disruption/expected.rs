//! How many pods a budget expects and how many must stay healthy, kube's
//! `getExpectedPodCount`: an integer minAvailable counts the pods there
//! are; a percentage, or any maxUnavailable, is taken of the desired
//! scale of the pods' controllers (a Deployment through its ReplicaSets,
//! a ReplicaSet, ReplicationController or StatefulSet from the caches,
//! anything else through its scale subresource). Pods without a
//! controller are reported, not counted.

use std::collections::HashMap;
use std::sync::Arc;

use capstan_client::informer::{key_from, Store};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::error::{Error, Result};
use crate::intstr::scaled_value;
use crate::ownership::controller_of;
use crate::scale::Scales;

/// What the budget's arithmetic comes to.
#[derive(Debug, Default, PartialEq)]
pub struct Expected {
    pub expected: i32,
    pub desired_healthy: i32,
    /// Names of matching pods no controller owns.
    pub unmanaged: Vec<String>,
}

/// Where controllers' desired replica counts are read.
pub struct Finders {
    pub replica_sets: Store<ReplicaSet>,
    pub deployments: Store<Deployment>,
    pub controllers: Store<ReplicationController>,
    pub stateful_sets: Store<StatefulSet>,
    pub scales: Scales,
    pub client: kube::Client,
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// `(uid, replicas)` of a cached object if its uid is the reference's.
fn cached<K: kube::Resource + 'static>(
    store: &Store<K>,
    namespace: &str,
    reference: &OwnerReference,
    replicas: impl Fn(&K) -> Option<i32>,
) -> Option<(String, i32)> {
    let object = store.get_by_key(&key_from(Some(namespace), &reference.name))?;
    let uid = object.meta().uid.clone()?;
    (uid == reference.uid).then(|| (uid, replicas(&object).unwrap_or(1)))
}

impl Finders {
    /// The controller behind `reference` and its desired scale; None if
    /// it is not there (or is another object by the same name).
    async fn scale(
        &self,
        namespace: &str,
        reference: &OwnerReference,
    ) -> Result<Option<(String, i32)>> {
        let group = group_of(&reference.api_version);
        match (group, reference.kind.as_str()) {
            ("apps", "ReplicaSet") => Ok(self.replica_set(namespace, reference)),
            ("", "ReplicationController") => {
                Ok(cached(&self.controllers, namespace, reference, |rc| {
                    rc.spec.as_ref()?.replicas
                }))
            }
            ("apps", "StatefulSet") => Ok(cached(&self.stateful_sets, namespace, reference, |s| {
                s.spec.as_ref()?.replicas
            })),
            _ => self.any_scale(namespace, reference).await,
        }
    }

    /// A ReplicaSet a Deployment controls counts as the Deployment.
    fn replica_set(&self, namespace: &str, reference: &OwnerReference) -> Option<(String, i32)> {
        let rs = self
            .replica_sets
            .get_by_key(&key_from(Some(namespace), &reference.name))?;
        if rs.metadata.uid.as_deref() != Some(reference.uid.as_str()) {
            return None;
        }
        match controller_of(&rs.metadata).filter(|r| r.kind == "Deployment") {
            Some(deployment) => cached(&self.deployments, namespace, deployment, |d| {
                d.spec.as_ref()?.replicas
            }),
            None => Some((
                reference.uid.clone(),
                rs.spec.as_ref()?.replicas.unwrap_or(1),
            )),
        }
    }

    async fn any_scale(
        &self,
        namespace: &str,
        reference: &OwnerReference,
    ) -> Result<Option<(String, i32)>> {
        let target = (reference.api_version.as_str(), reference.kind.as_str());
        match self
            .scales
            .get(&self.client, namespace, target, &reference.name)
            .await
        {
            Ok(scale) => {
                let uid = scale.metadata.uid.clone().unwrap_or_default();
                let replicas = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
                Ok((uid == reference.uid).then_some((uid, replicas)))
            }
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The sum of the desired scales of the pods' controllers.
    async fn expected_scale(&self, pods: &[Arc<Pod>]) -> Result<(i32, Vec<String>)> {
        let mut scales: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(reference) = controller_of(&pod.metadata) else {
                unmanaged.push(name);
                continue;
            };
            if scales.contains_key(&reference.uid) {
                continue;
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            match self.scale(namespace, reference).await? {
                Some((uid, replicas)) => scales.insert(uid, replicas),
                None => {
                    return Err(Error::Invalid(format!(
                        "found no controllers for pod {name:?}"
                    )))
                }
            };
        }
        Ok((scales.values().sum(), unmanaged))
    }

    /// The budget's expected pods and desired healthy count over `pods`.
    pub async fn expected(&self, pdb: &PodDisruptionBudget, pods: &[Arc<Pod>]) -> Result<Expected> {
        let spec = pdb.spec.clone().unwrap_or_default();
        if let Some(max_unavailable) = &spec.max_unavailable {
            let (expected, unmanaged) = self.expected_scale(pods).await?;
            let unavailable =
                scaled_value(max_unavailable, expected, true).map_err(Error::Invalid)?;
            let desired_healthy = (expected - unavailable).max(0);
            return Ok(Expected {
                expected,
                desired_healthy,
                unmanaged,
            });
        }
        match &spec.min_available {
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
                Ok(Expected {
                    expected: pods.len() as i32,
                    desired_healthy: *n,
                    unmanaged: Vec::new(),
                })
            }
            Some(percent) => {
                let (expected, unmanaged) = self.expected_scale(pods).await?;
                let desired_healthy =
                    scaled_value(percent, expected, true).map_err(Error::Invalid)?;
                Ok(Expected {
                    expected,
                    desired_healthy,
                    unmanaged,
                })
            }
            None => Ok(Expected::default()),
        }
    }
}
