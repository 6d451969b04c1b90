//! Liveness: the node Leases, renewed often, and the Node statuses,
//! reported rarely (kube's lease-based heartbeat).

pub mod lease;
