//! CEL, shared by ValidatingAdmissionPolicy (`admission::policy`), webhook
//! match conditions and the `x-kubernetes-validations` rules of custom
//! resources (`registry::kinds::custom::rules`), on the `cel` crate
//! (cel-rust).
//!
//! An expression is compiled once against the variables its user declares
//! ([`compile`]: kube's `compilation failed: ...` messages) and rewritten
//! to meter its own work ([`instrument`], [`meter`]); it is evaluated over
//! an [`Activation`] (JSON inputs converted once by [`to_cel`]) and stops
//! with kube's error past kube's cost limits ([`cost`]).

mod compile;
pub mod cost;
mod environment;
mod instrument;
mod kube_lists;
mod meter;
#[cfg(test)]
mod meter_tests;
mod values;

pub use compile::{compile, Expression};
pub use cost::{Budget, EvalError};
pub use values::{to_cel, Activation};
