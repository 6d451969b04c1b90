//! Simulated nodes that run pods, as kwok simulates them: each node has a
//! Node object and a Lease it renews, and the pods bound to it go through
//! a kubelet's lifecycle (admission, init containers, probes, restarts,
//! graceful deletion) in as few status writes as the lifecycle allows.

pub mod admin;
pub mod clock;
pub mod config;
pub mod error;
pub mod heartbeat;
pub mod impersonation;
pub mod kubelet;
pub mod metrics_api;
pub mod node;
pub mod pod;
pub mod quantity;
pub mod runtime;
pub mod serving;
pub mod settings;

pub use runtime::run;
