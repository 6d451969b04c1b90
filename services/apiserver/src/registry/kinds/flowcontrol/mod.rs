//! flowcontrol.apiserver.k8s.io/v1: FlowSchemas and
//! PriorityLevelConfigurations, the objects API Priority and Fairness
//! reads (see `crate::flowcontrol`), both cluster-scoped with a status;
//! [`maintain`] keeps kube's mandatory and suggested ones in place and
//! feeds the engine.

pub mod flowschemas;
pub mod maintain;
pub mod prioritylevels;

use std::sync::Arc;

use crate::registry::Strategy;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(flowschemas::strategy()),
        Arc::new(prioritylevels::strategy()),
    ]
}
