//! Admission: plugins that see every write after it is decoded and
//! defaulted and before it is stored, as kube-apiserver's admission
//! chain does. The generic flow runs, in kube's order: decode → defaults
//! (the strategy's `prepare_for_*`) → every plugin's mutating step →
//! the strategy's validation → every plugin's validating step → storage.
//! A plugin's denial answers the request as a Kubernetes `Status`
//! (403 Forbidden, `<resource> "<name>" is forbidden: <why>`) and nothing
//! is stored. The chain is empty unless `startup.rs` puts plugins in it.

mod attributes;
mod chain;

pub use attributes::{Attributes, Operation, UserInfo};
pub use chain::{Chain, Denial, Plugin};
