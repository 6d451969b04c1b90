//! Admission: plugins that see every write after it is decoded and
//! defaulted and before it is stored, as kube-apiserver's admission
//! chain does. The generic flow runs, in kube's order: decode → defaults
//! (the strategy's `prepare_for_*`) → every plugin's mutating step →
//! the strategy's validation → every plugin's validating step → storage.
//! A plugin's denial answers the request as a Kubernetes `Status`
//! (403 Forbidden, `<resource> "<name>" is forbidden: <why>`) and nothing
//! is stored. Which plugins run is `--enable-admission-plugins` /
//! `--disable-admission-plugins` over kube's default set
//! ([`plugins::select`]); `startup` installs them once the types they
//! look at ([`objects::Objects`]) are served.

mod attributes;
mod chain;
pub mod config_file;
mod feedback;
pub mod objects;
pub mod plugins;
pub mod pod_security;
pub mod policy;
pub mod quota_scopes;
pub mod usage;
pub mod webhook;

pub use attributes::{Attributes, Operation};
pub use chain::{allow, AdmissionError, Admit, BadField, Chain, Denial, Plugin, Rejection};
pub use feedback::Feedback;
