//! admissionregistration.k8s.io/v1: ValidatingAdmissionPolicies and
//! their bindings, and the admission webhook configurations.

mod policies;
mod webhooks;

use std::sync::Arc;

use crate::registry::Strategy;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    let mut kinds = policies::all();
    kinds.extend(webhooks::all());
    kinds
}
