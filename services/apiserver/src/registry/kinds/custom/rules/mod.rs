//! `x-kubernetes-validations`: CEL rules at the nodes of a CRD's schema.
//! Each rule sees the value at its node as `self`; a transition rule
//! (one that reads `oldSelf`) also sees the value the stored object had
//! there, and runs only on updates that have one (or always, with
//! `optionalOldSelf`, `oldSelf` then being a CEL optional). Rules are
//! compiled once per CRD generation ([`compile`]); the CRD's own
//! validation refuses one that does not compile, with kube's causes.
//! A failed rule is a cause at its node ([`evaluate`]), in kube's words.

mod compile;
mod evaluate;
#[cfg(test)]
mod tests;
mod tree;

pub use compile::{check, field_schema};
pub use tree::Rules;
