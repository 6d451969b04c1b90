//! The core group (`/api/v1`).

pub mod configmaps;
pub mod events;
pub mod namespaces;
pub mod nodes;
pub mod pods;
pub mod podtemplates;
pub mod quotas;
pub mod replicationcontrollers;
pub mod secrets;
pub mod serviceaccounts;
pub mod services;
pub mod volumes;
pub mod workload;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Endpoints;

use crate::registry::kinds::common::simple::{def, simple};
use crate::registry::{ResourceDef, Strategy};

pub fn all() -> Vec<Arc<dyn Strategy>> {
    let mut kinds: Vec<Arc<dyn Strategy>> = vec![
        Arc::new(namespaces::Namespaces),
        Arc::new(configmaps::ConfigMaps),
        Arc::new(secrets::Secrets),
        Arc::new(pods::strategy::Pods),
        Arc::new(services::strategy::Services),
        nodes::nodes(),
        events::events(),
        Arc::new(simple::<Endpoints>(ResourceDef {
            short_names: &["ep"],
            ..def("", "endpoints", "Endpoints", "endpoints")
        })),
        replicationcontrollers::replication_controllers(),
        Arc::new(serviceaccounts::strategy::ServiceAccounts::default()),
    ];
    kinds.extend(volumes::all());
    kinds.push(podtemplates::pod_templates());
    kinds.extend(quotas::all());
    kinds
}
