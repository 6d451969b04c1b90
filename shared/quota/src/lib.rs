//! ResourceQuota accounting, shared by the API server (the ResourceQuota
//! and LimitRanger admission plugins: what a write adds) and the
//! controller manager (the resource-quota controller: what a namespace
//! holds), so the two count alike.

pub mod quantity;
pub mod scopes;
pub mod usage;
