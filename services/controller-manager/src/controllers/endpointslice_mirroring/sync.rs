//! One Endpoints' mirror, kube's mirroring `syncEndpoints`: an Endpoints
//! object is mirrored while its Service exists without a selector (the
//! endpoints controller does not write it), it is not labelled
//! `endpointslice.kubernetes.io/skip-mirror: "true"` and holds no
//! leader-election record; otherwise this controller's slices for it go.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::desired::mirror;
use super::{CONTROLLER_NAME, MAX_ENDPOINTS_PER_SUBSET, SKIP_MIRROR};
use crate::context::Reconciler;
use crate::controllers::endpoints::{selection, LEADER_ANNOTATION};
use crate::controllers::endpointslice::reconcile::{self, Plan, Template};
use crate::controllers::endpointslice::sync::{apply, stale_cache};
use crate::controllers::endpointslice::tracker::Tracker;
use crate::controllers::endpointslice::{owned_slices, MANAGED_BY, SERVICE_NAME};
use crate::error::Result;
use crate::ownership::controller_ref;

/// Annotations an Endpoints carries that its slices do not.
const NOT_MIRRORED: [&str; 2] = [
    "endpoints.kubernetes.io/last-change-trigger-time",
    "kubectl.kubernetes.io/last-applied-configuration",
];

/// What the reconcile reads and writes.
pub struct Syncer {
    pub services: Store<Service>,
    pub endpoints: Store<Endpoints>,
    pub slices: Store<EndpointSlice>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    pub tracker: Arc<Tracker>,
}

impl Reconciler for Syncer {
    /// Syncs the mirror of the Endpoints with `key` (`namespace/name`).
    async fn sync(&self, key: &str) -> Result<()> {
        let existing = owned_slices(&self.slices, key, CONTROLLER_NAME);
        if self.tracker.stale(key, &existing) {
            return Err(stale_cache());
        }
        let endpoints = self.endpoints.get_by_key(key);
        let mirrored = endpoints.as_ref().filter(|e| self.should_mirror(key, e));
        let Some(endpoints) = mirrored else {
            if existing.is_empty() {
                self.tracker.forget(key);
                return Ok(());
            }
            let plan = Plan {
                delete: existing,
                ..Plan::default()
            };
            return apply(&self.client, &self.tracker, key, plan).await;
        };
        let mirror = mirror(endpoints, MAX_ENDPOINTS_PER_SUBSET);
        self.report_left_out(endpoints, mirror.invalid, mirror.skipped);
        let template = template(endpoints);
        let per_slice = MAX_ENDPOINTS_PER_SUBSET;
        let plan = reconcile::plan(&existing, mirror.groups, &template, per_slice, &[]);
        let result = apply(&self.client, &self.tracker, key, plan).await;
        if let Err(err) = &result {
            let message = format!("Error updating EndpointSlices for Endpoints {key}: {err}");
            self.recorder.record(
                endpoints.as_ref(),
                EventType::Warning,
                "FailedToUpdateEndpointSlices",
                message,
            );
        }
        result
    }
}

impl Syncer {
    fn should_mirror(&self, key: &str, endpoints: &Endpoints) -> bool {
        let labels = endpoints.metadata.labels.as_ref();
        let skip = labels
            .and_then(|l| l.get(SKIP_MIRROR))
            .is_some_and(|v| v == "true");
        let annotations = endpoints.metadata.annotations.as_ref();
        let leader = annotations.is_some_and(|a| a.contains_key(LEADER_ANNOTATION));
        let selectorless = self
            .services
            .get_by_key(key)
            .is_some_and(|s| selection::selector(&s).is_none());
        selectorless && !skip && !leader
    }

    fn report_left_out(&self, endpoints: &Endpoints, invalid: usize, skipped: usize) {
        if invalid > 0 {
            self.recorder.record(
                endpoints,
                EventType::Warning,
                "InvalidIPAddress",
                format!("Skipped {invalid} invalid IP addresses when mirroring to EndpointSlices"),
            );
        }
        if skipped > 0 {
            self.recorder.record(
                endpoints,
                EventType::Warning,
                "TooManyAddressesToMirror",
                format!(
                    "A max of {MAX_ENDPOINTS_PER_SUBSET} addresses can be mirrored to \
                     EndpointSlices per Endpoints subset. {skipped} addresses were skipped"
                ),
            );
        }
    }
}

/// The labels, annotations, owner and name prefix of the mirror's slices.
pub fn template(endpoints: &Endpoints) -> Template {
    let name = endpoints.metadata.name.clone().unwrap_or_default();
    let mut labels = endpoints.metadata.labels.clone().unwrap_or_default();
    labels.insert(SERVICE_NAME.into(), name.clone());
    labels.insert(MANAGED_BY.into(), CONTROLLER_NAME.into());
    let annotations: BTreeMap<String, String> = endpoints
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !NOT_MIRRORED.contains(&k.as_str()))
        .collect();
    Template {
        namespace: endpoints.metadata.namespace.clone().unwrap_or_default(),
        generate_name: format!("{name}-"),
        labels,
        annotations,
        owner: controller_ref(endpoints),
    }
}
