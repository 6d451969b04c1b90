//! Kubernetes resource quantities: `capstan_quota::quantity`, shared with
//! the controller manager.

pub use capstan_quota::quantity::*;
