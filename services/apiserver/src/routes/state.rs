//! What every handler shares.

use std::sync::Arc;

use super::chain::Chain;
use super::openapi::Documents;
use crate::metrics::Metrics;
use crate::registry::Catalog;
use crate::storage::Store;

pub struct AppState {
    pub catalog: Arc<Catalog>,
    pub metrics: Arc<Metrics>,
    pub openapi: Documents,
    /// For readiness: can the store be reached?
    pub store: Store,
    /// The steps before the REST handler (see [`chain`]).
    pub chain: Chain,
    /// Issues and verifies service-account tokens, when configured.
    pub issuer: Option<Arc<crate::serviceaccount::Issuer>>,
    /// What the kinds' own subresource code may use.
    pub services: Arc<crate::registry::subresource::Services>,
    /// The APIServices: which group/versions other servers answer.
    pub aggregator: Arc<crate::aggregator::Aggregator>,
    /// Reaches nodes' kubelets (pods/log, exec, attach).
    pub kubelets: Arc<crate::kubelet_client::KubeletClient>,
}
