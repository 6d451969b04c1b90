//! `ValidatingAdmissionPolicy`: policies (admissionregistration.k8s.io/v1
//! ValidatingAdmissionPolicy) hold CEL validations ([`expressions`],
//! compiled once per policy generation: [`compiled`]); bindings
//! (ValidatingAdmissionPolicyBinding) apply a policy to the requests
//! both select ([`matching`]) with their validationActions: Deny refuses
//! (kube's `ValidatingAdmissionPolicy 'p' with binding 'b' denied
//! request: ...`, 422 Invalid unless the validation names another
//! reason), Warn adds a Warning header, Audit an audit annotation.

pub mod compiled;
pub mod expressions;
mod matching;
mod plugin;
#[cfg(test)]
mod plugin_tests;

pub use plugin::{request as request_input, ValidatingAdmissionPolicy};
