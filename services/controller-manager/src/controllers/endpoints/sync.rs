//! One Service's Endpoints, kube's `syncService`: gone Service, gone
//! Endpoints; a Service without a selector is left to whoever writes its
//! Endpoints; otherwise the subsets from its pods are written when they
//! (or the labels, or the capacity annotation) differ from what is stored.

use std::collections::BTreeMap;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints, Pod, Service};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use super::{selection, subsets};
use crate::context::Reconciler;
use crate::error::{Error, Result};

/// The label a headless Service's Endpoints carry.
pub const HEADLESS: &str = "service.kubernetes.io/headless";
const TRUNCATED: &str = "truncated";

/// What the reconcile reads and writes.
pub struct Syncer {
    pub services: Store<Service>,
    pub pods: Store<Pod>,
    pub endpoints: Store<Endpoints>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
}

impl Reconciler for Syncer {
    /// Syncs the Endpoints of the Service with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        let Some(service) = self.services.get_by_key(key) else {
            return self.delete(namespace, name).await;
        };
        if selection::selector(&service).is_none() {
            return Ok(());
        }
        let pods = selection::pods_of(&self.pods, &service);
        let mut wanted = subsets::for_service(&service, &pods);
        let truncated = subsets::truncate(&mut wanted);
        let labels = labels_for(&service);
        let current = self.endpoints.get_by_key(key);
        if let Some(current) = &current {
            if unchanged(current, &wanted, &labels, truncated) {
                return Ok(());
            }
        }
        let creating = current.is_none();
        let mut endpoints = current.map(|c| (*c).clone()).unwrap_or_else(|| Endpoints {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            ..Endpoints::default()
        });
        endpoints.subsets = Some(wanted);
        endpoints.metadata.labels = Some(labels);
        let annotations = endpoints
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        match truncated {
            true => annotations.insert(subsets::OVER_CAPACITY.into(), TRUNCATED.into()),
            false => annotations.remove(subsets::OVER_CAPACITY),
        };
        self.write(&service, endpoints, creating).await
    }
}

impl Syncer {
    async fn write(&self, service: &Service, endpoints: Endpoints, creating: bool) -> Result<()> {
        let namespace = endpoints.metadata.namespace.clone().unwrap_or_default();
        let name = endpoints.metadata.name.clone().unwrap_or_default();
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), &namespace);
        let result = match creating {
            true => api.create(&PostParams::default(), &endpoints).await,
            false => api.replace(&name, &PostParams::default(), &endpoints).await,
        };
        let Err(err) = result.map_err(Error::from) else {
            return Ok(());
        };
        if creating && err.is_namespace_terminating() {
            return Ok(());
        }
        let service_name = service.metadata.name.as_deref().unwrap_or_default();
        let (reason, message) = match creating {
            true => (
                "FailedToCreateEndpoint",
                format!("Failed to create endpoint for service {namespace}/{service_name}: {err}"),
            ),
            false => (
                "FailedToUpdateEndpoint",
                format!("Failed to update endpoint {namespace}/{service_name}: {err}"),
            ),
        };
        self.recorder
            .record(&endpoints, EventType::Warning, reason, message);
        Err(err)
    }

    /// The Service is gone: so are its Endpoints. The cache may simply not
    /// have a Service created a moment ago (its Endpoints, written by hand
    /// for a Service without a selector, can arrive first), so the API is
    /// asked before anything is deleted; the Service's own event syncs again.
    async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        if services.get_opt(name).await.map_err(Error::from)?.is_some() {
            return Ok(());
        }
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(err) => {
                let err = Error::from(err);
                match err.is_not_found() {
                    true => Ok(()),
                    false => Err(err),
                }
            }
        }
    }
}

/// The Service's labels, plus the headless marker when it has no cluster IP.
pub fn labels_for(service: &Service) -> BTreeMap<String, String> {
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    match selection::is_headless(service) {
        true => labels.insert(HEADLESS.into(), String::new()),
        false => labels.remove(HEADLESS),
    };
    labels
}

fn unchanged(
    current: &Endpoints,
    wanted: &[EndpointSubset],
    labels: &BTreeMap<String, String>,
    truncated: bool,
) -> bool {
    let subsets = current.subsets.as_deref().unwrap_or_default();
    let current_labels = current.metadata.labels.clone().unwrap_or_default();
    let marked = current
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(subsets::OVER_CAPACITY));
    subsets == wanted && &current_labels == labels && marked == truncated
}
