//! ReplicaSets and ReplicationControllers are one controller over two
//! types (as kube's replication manager wraps the ReplicaSet controller):
//! this trait is what the controller reads of either.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{NamespaceResourceScope, Selector};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A type whose objects keep N pods matching a selector.
pub trait Replicated:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// The work queue's name (kube's: `replicaset`, `replicationmanager`).
    const QUEUE: &'static str;
    /// The service account it acts as, and its events' component.
    const ACCOUNT: &'static str;
    /// `--concurrent-*-syncs`.
    fn workers(settings: &crate::config::Settings) -> usize;

    fn replicas(&self) -> i32;
    fn label_selector(&self) -> LabelSelector;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn min_ready_seconds(&self) -> i32;
    /// The status in ReplicaSet's shape (the two are field for field alike).
    fn status(&self) -> ReplicaSetStatus;
    /// Replaces the status.
    fn set_status(&mut self, status: &ReplicaSetStatus);

    /// The selector, parsed; an error says what is wrong with it.
    fn selector(&self) -> Result<Selector, String> {
        let selector = self.label_selector();
        let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty());
        if empty {
            return Err("empty selector is not allowed".into());
        }
        Selector::try_from(selector).map_err(|e| e.0)
    }
}

impl Replicated for ReplicaSet {
    const QUEUE: &'static str = "replicaset";
    const ACCOUNT: &'static str = "replicaset-controller";

    fn workers(settings: &crate::config::Settings) -> usize {
        settings.concurrent_replicaset_syncs
    }

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn label_selector(&self) -> LabelSelector {
        self.spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default()
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn status(&self) -> ReplicaSetStatus {
        self.status.clone().unwrap_or_default()
    }

    fn set_status(&mut self, status: &ReplicaSetStatus) {
        self.status = Some(status.clone());
    }
}

impl Replicated for ReplicationController {
    const QUEUE: &'static str = "replicationmanager";
    const ACCOUNT: &'static str = "replication-controller";

    fn workers(settings: &crate::config::Settings) -> usize {
        settings.concurrent_rc_syncs
    }

    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    /// An RC's selector is a map; an absent one defaults (in the API
    /// server) to the template's labels.
    fn label_selector(&self) -> LabelSelector {
        let spec = self.spec.as_ref();
        let selector = spec.and_then(|s| s.selector.clone()).or_else(|| {
            let template = spec?.template.as_ref()?;
            template.metadata.as_ref()?.labels.clone()
        });
        LabelSelector {
            match_labels: selector,
            match_expressions: None,
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref()?.template.as_ref()
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn status(&self) -> ReplicaSetStatus {
        let value = serde_json::to_value(&self.status).unwrap_or_default();
        serde_json::from_value(value).unwrap_or_default()
    }

    fn set_status(&mut self, status: &ReplicaSetStatus) {
        let value = serde_json::to_value(status).unwrap_or_default();
        self.status = serde_json::from_value(value).ok();
    }
}
