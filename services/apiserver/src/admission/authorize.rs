//! What admission may ask the server's authorizer (kube hands its
//! authorizer to ValidatingAdmissionPolicy's CEL `authorizer` library).
//! Admission sits below the handler chain that owns the authorizers, so
//! it declares this small interface and `startup.rs` fills the
//! [`AuthorizerSlot`] with the chain's authorizer once that is built.

use std::sync::{Arc, OnceLock};

use super::UserInfo;

/// One question, in the terms of kube's `authorizer.Attributes`.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// Set for a non-resource request (`authorizer.path('/healthz')`).
    pub path: Option<&'a str>,
}

/// kube's authorizer decision, with the reason given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allow(String),
    Deny(String),
    NoOpinion(String),
}

pub trait Authorize: Send + Sync {
    fn authorize(&self, question: &Question<'_>) -> Answer;
}

/// Filled once at start-up, after the admission plugins are built.
pub type AuthorizerSlot = Arc<OnceLock<Arc<dyn Authorize>>>;
