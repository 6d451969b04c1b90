//! coordination.k8s.io/v1: Leases (leader election, node heartbeats).

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;

use crate::registry::kinds::common::simple::{def, simple};
use crate::registry::Strategy;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(simple::<Lease>(def(
        "coordination.k8s.io",
        "leases",
        "Lease",
        "lease",
    )))]
}
