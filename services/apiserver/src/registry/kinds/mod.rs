//! Every built-in kind, one folder (or file) per API group; each kind's
//! strategy and its special parts (subresources, deletion rules) live in
//! its group's folder. [`all`] is the one list of what is served.

pub mod admissionregistration;
pub mod apiextensions;
pub mod apiregistration;
pub mod apps;
pub mod autoscaling;
pub mod batch;
pub mod common;
pub mod coordination;
pub mod core;
pub mod custom;
pub mod discovery;
#[cfg(test)]
pub mod example;
pub mod flowcontrol;
pub mod networking;
pub mod policy;
pub mod rbac;
pub mod scheduling;
pub mod storage;

use std::sync::Arc;

use super::Strategy;

pub use core::namespaces::NAMESPACES;

/// Every served built-in kind, groups in the order discovery lists them.
pub fn all() -> Vec<Arc<dyn Strategy>> {
    let groups = [
        core::all(),
        apps::all(),
        coordination::all(),
        batch::all(),
        autoscaling::v2::all(),
        policy::all(),
        vec![Arc::new(autoscaling::v1::autoscalers_v1())],
        networking::all(),
        rbac::roles::all(),
        storage::all(),
        scheduling::all(),
        discovery::all(),
        admissionregistration::all(),
        vec![Arc::new(apiextensions::Crds::default())],
        apiregistration::all(),
        flowcontrol::all(),
    ];
    groups.concat()
}
