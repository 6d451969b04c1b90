//! What the handler chain holds: its pluggable steps.

use std::sync::Arc;

use std::time::Duration;

use super::watch_quota::WatchQuota;
use super::{audit, authentication, flow_control};
use crate::auth::{AlwaysAllow, Authorizer};

/// The chain's pluggable steps (`startup` assembles them from the flags).
pub struct Chain {
    pub flow_control: flow_control::FlowControlStep,
    pub authenticator: Arc<dyn authentication::Authenticator>,
    /// The audiences a request's token must be for (`--api-audiences`).
    pub audiences: Vec<String>,
    pub audit: audit::Audit,
    /// The `--authorization-mode` union.
    pub authorizer: Arc<dyn Authorizer>,
    /// Open watches per user (`--max-watches-per-user`).
    pub watch_quota: Arc<WatchQuota>,
}

impl Chain {
    /// Every request is anonymous and allowed; nothing is audited.
    pub fn allow_all() -> Chain {
        Chain {
            flow_control: flow_control::FlowControlStep::new(
                std::sync::Arc::new(crate::flowcontrol::FlowControl::new(
                    600,
                    Duration::from_secs(15),
                    Default::default(),
                )),
                Default::default(),
            ),
            authenticator: Arc::new(authentication::Anonymous),
            audiences: Vec::new(),
            audit: audit::Audit::default(),
            authorizer: Arc::new(AlwaysAllow),
            watch_quota: WatchQuota::new(0),
        }
    }
}
