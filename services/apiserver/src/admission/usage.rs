//! What an object uses of a ResourceQuota: `capstan_quota::usage`, shared
//! with the controller manager's resource-quota controller.

pub use capstan_quota::usage::*;
