//! One Service's EndpointSlices, kube's `syncService`: wait until the
//! cache shows this controller's last writes, then plan the slices the
//! Service's pods call for and write the difference. A Service without a
//! selector (or an ExternalName one) keeps none of this controller's
//! slices; a deleted Service's slices go with it (the garbage collector
//! follows their owner reference).

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use super::reconcile::{self, Plan, Template};
use super::tracker::Tracker;
use super::{desired, owned_slices, CONTROLLER_NAME, MANAGED_BY, SERVICE_NAME};
use crate::context::Reconciler;
use crate::controllers::endpoints::{selection, sync::HEADLESS};
use crate::error::{Error, Result};
use crate::ownership::controller_ref;

/// What the reconcile reads and writes.
pub struct Syncer {
    pub services: Store<Service>,
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub slices: Store<EndpointSlice>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    pub tracker: Arc<Tracker>,
    /// `--max-endpoints-per-slice`.
    pub max_per_slice: usize,
}

/// The error a sync returns while the cache lags its own writes (retried).
pub fn stale_cache() -> Error {
    Error::Invalid("EndpointSlice informer cache is out of date".into())
}

impl Reconciler for Syncer {
    /// Syncs the slices of the Service with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(service) = self.services.get_by_key(key) else {
            self.tracker.forget(key);
            return Ok(());
        };
        let existing = owned_slices(&self.slices, key, CONTROLLER_NAME);
        if self.tracker.stale(key, &existing) {
            return Err(stale_cache());
        }
        let plan = match selection::selector(&service).is_some()
            && !selection::is_external_name(&service)
        {
            true => {
                let pods = selection::pods_of(&self.pods, &service);
                let groups = desired::groups(&service, &pods, &self.nodes);
                let types = desired::address_types(&service);
                reconcile::plan(
                    &existing,
                    groups,
                    &template(&service),
                    self.max_per_slice,
                    &types,
                )
            }
            false => Plan {
                delete: existing,
                ..Plan::default()
            },
        };
        let result = apply(&self.client, &self.tracker, key, plan).await;
        if let Err(err) = &result {
            let message = format!("Error updating Endpoint Slices for Service {key}: {err}");
            self.recorder.record(
                service.as_ref(),
                EventType::Warning,
                "FailedToUpdateEndpointSlices",
                message,
            );
        }
        result
    }
}

/// The labels, owner and name prefix of the Service's slices.
pub fn template(service: &Service) -> Template {
    let name = service.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = service
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != SERVICE_NAME && k != MANAGED_BY && k != HEADLESS)
        .collect();
    if selection::is_headless(service) {
        labels.insert(HEADLESS.into(), String::new());
    }
    labels.insert(SERVICE_NAME.into(), name.clone());
    labels.insert(MANAGED_BY.into(), CONTROLLER_NAME.into());
    Template {
        namespace: service.metadata.namespace.clone().unwrap_or_default(),
        generate_name: format!("{name}-"),
        labels,
        annotations: BTreeMap::new(),
        owner: controller_ref(service),
    }
}

/// Writes `plan` for the owner `key`: creations first (so endpoints never
/// vanish in between), then updates, then deletions; every write is
/// tracked. Goes on past a failed write and returns the first failure.
pub async fn apply(client: &kube::Client, tracker: &Tracker, key: &str, plan: Plan) -> Result<()> {
    let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let mut failures: Vec<Error> = Vec::new();
    let attempted = plan.create.len() + plan.update.len() + plan.delete.len();
    for slice in &plan.create {
        match api
            .create(&PostParams::default(), slice)
            .await
            .map_err(Error::from)
        {
            Ok(written) => tracker.expect(key, &written),
            // The namespace is going, and its slices with it.
            Err(err) if err.is_namespace_terminating() => {}
            Err(err) => failures.push(err),
        }
    }
    for slice in &plan.update {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        match api.replace(name, &PostParams::default(), slice).await {
            Ok(written) => tracker.expect(key, &written),
            Err(err) => failures.push(err.into()),
        }
    }
    for slice in &plan.delete {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        let uid = slice.metadata.uid.clone().unwrap_or_default();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await.map_err(Error::from) {
            Ok(_) => tracker.expect_deleted(key, &uid),
            Err(err) if err.is_not_found() => tracker.expect_deleted(key, &uid),
            Err(err) => failures.push(err),
        }
    }
    let failed = failures.len();
    match failures.into_iter().next() {
        None => Ok(()),
        Some(first) if failed == 1 => Err(first),
        Some(first) => Err(Error::Partial {
            attempted,
            failed,
            first: Box::new(first),
        }),
    }
}
