//! capstan-client: the API-client machinery shared by Capstan's
//! controllers, scheduler and simulated nodes.
#![deny(missing_docs)]

pub mod connect;
pub mod error;
pub mod metrics;
pub mod rate;

pub use error::{Error, Result};
pub use k8s_openapi;
pub use kube;
pub mod events;
pub mod health;
pub mod informer;
pub mod leader;
pub mod queue;
