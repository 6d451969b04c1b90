//! One strategy per resource type.

mod admission_policy;
mod admissionregistration;
pub mod apiservice;
mod autoscaling;
mod autoscaling_v1;
mod batch;
mod common;
mod configmap;
mod core_storage;
pub mod crd;
pub mod custom;
mod deployment;
mod discovery;
mod hpa_conversion;
mod namespace;
mod networking;
mod pod;
mod pod_validation;
mod rbac;
pub mod rbac_covers;
mod rbac_escalation;
mod scheduling;
mod secret;
mod service;
pub mod service_ranges;
mod serviceaccount;
mod simple;
mod storage;
pub mod workload;

use std::sync::Arc;

use super::Strategy;

pub use namespace::NAMESPACES;

/// Every served resource type, in discovery order.
pub fn all() -> Vec<Arc<dyn Strategy>> {
    let mut kinds: Vec<Arc<dyn Strategy>> = vec![
        Arc::new(namespace::Namespaces),
        Arc::new(configmap::ConfigMaps),
        Arc::new(secret::Secrets),
        Arc::new(pod::Pods),
        Arc::new(service::Services),
        Arc::new(deployment::Deployments),
    ];
    kinds.extend(simple::all());
    kinds.push(Arc::new(serviceaccount::ServiceAccounts::new()));
    kinds.extend(core_storage::all());
    kinds.extend(batch::all());
    kinds.extend(autoscaling::all());
    kinds.push(Arc::new(autoscaling_v1::autoscalers_v1()));
    kinds.extend(networking::all());
    kinds.extend(rbac::all());
    kinds.extend(storage::all());
    kinds.extend(scheduling::all());
    kinds.extend(discovery::all());
    kinds.extend(admission_policy::all());
    kinds.extend(admissionregistration::all());
    kinds.push(Arc::new(crd::Crds::default()));
    kinds.extend(apiservice::all());
    kinds
}

/// `"a=b,c=d"` from a string map, as kubectl shows selectors.
pub fn map_string(value: &serde_json::Value) -> String {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Sets `obj[path...] = value` when absent, creating objects on the way.
pub fn default_at(obj: &mut serde_json::Value, path: &[&str], value: serde_json::Value) {
    let mut cursor = obj;
    for key in &path[..path.len() - 1] {
        if !cursor[*key].is_object() {
            cursor[*key] = serde_json::json!({});
        }
        cursor = &mut cursor[*key];
    }
    let last = path[path.len() - 1];
    if cursor.get(last).is_none_or(|v| v.is_null()) {
        cursor[last] = value;
    }
}
