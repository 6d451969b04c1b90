//! CEL, shared by ValidatingAdmissionPolicy (`admission::policy`) and the
//! `x-kubernetes-validations` rules of custom resources
//! (`registry::kinds::custom::rules`), on the `cel` crate (cel-rust).
//!
//! An expression is compiled once against the variables its user declares
//! ([`compile`]: kube's `compilation failed: ...` messages), evaluated with
//! JSON inputs converted by [`to_cel`], and carries what [`cost`] needs to
//! refuse an evaluation that could run away before it starts.

mod compile;
pub mod cost;
mod environment;
mod kube_lists;
mod values;

pub use compile::{compile, Expression};
pub use values::to_cel;
