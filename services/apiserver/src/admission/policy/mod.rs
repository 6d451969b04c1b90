//! `ValidatingAdmissionPolicy`: policies (admissionregistration.k8s.io/v1
//! ValidatingAdmissionPolicy) hold CEL validations ([`expressions`],
//! compiled once per policy generation: [`compiled`]); bindings
//! (ValidatingAdmissionPolicyBinding) apply a policy to the requests
//! both select ([`matching`]) with their validationActions: Deny refuses
//! (kube's `ValidatingAdmissionPolicy 'p' with binding 'b' denied
//! request: ...`, 422 Invalid unless the validation names another
//! reason), Warn adds a Warning header, Audit an audit annotation.
//! A policy with a `paramKind` is evaluated once per object its binding's
//! `paramRef` finds ([`params`]), as `params`; CEL's `authorizer`
//! ([`authz`]) asks the server's authorizer.

mod authz;
pub mod compiled;
pub mod expressions;
mod matching;
mod params;
mod plugin;
#[cfg(test)]
mod plugin_tests;

pub use plugin::{request as request_input, ValidatingAdmissionPolicy};
