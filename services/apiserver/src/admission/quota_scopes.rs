//! Which objects a ResourceQuota's scopes count: `capstan_quota::scopes`,
//! shared with the controller manager's resource-quota controller.

pub use capstan_quota::scopes::*;
