//! What the handler chain holds: its pluggable steps.

use std::sync::Arc;

use super::{audit, authentication, max_in_flight};
use crate::auth::{AlwaysAllow, Authorizer};

/// The chain's pluggable steps (`startup` assembles them from the flags).
pub struct Chain {
    pub in_flight: max_in_flight::MaxInFlight,
    pub authenticator: Arc<dyn authentication::Authenticator>,
    /// The audiences a request's token must be for (`--api-audiences`).
    pub audiences: Vec<String>,
    pub audit: audit::Audit,
    /// The `--authorization-mode` union.
    pub authorizer: Arc<dyn Authorizer>,
}

impl Chain {
    /// Every request is anonymous and allowed; nothing is audited.
    pub fn allow_all() -> Chain {
        Chain {
            in_flight: max_in_flight::MaxInFlight::default(),
            authenticator: Arc::new(authentication::Anonymous),
            audiences: Vec::new(),
            audit: audit::Audit::default(),
            authorizer: Arc::new(AlwaysAllow),
        }
    }
}
