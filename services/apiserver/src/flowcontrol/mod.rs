//! API Priority and Fairness: every request is classified by the
//! FlowSchemas into a flow of a priority level; each level has a share
//! of the server's concurrency and fair queues, so that one noisy client
//! waits behind itself instead of in front of everyone else.
//!
//! - [`config`] reads the FlowSchema and PriorityLevelConfiguration
//!   objects ([`bootstrap`] holds kube's mandatory and suggested ones);
//! - [`classify`] picks a request's schema and flow;
//! - [`limits`] shares the server's seats among the levels, lending and
//!   borrowing by demand ([`demand`]);
//! - [`queueset`] queues and dispatches within a level, shuffle-sharding
//!   flows over its queues ([`dealer`]);
//! - [`estimate`] says how many seats a request takes;
//! - [`controller`] ties them together: [`FlowControl::admit`] lets a
//!   request run, queues it, or rejects it with what a 429 needs.
//!
//! The engine knows nothing of HTTP or routes: the chain describes a
//! request with a [`RequestDigest`].

pub mod admission;
pub mod bootstrap;
pub mod classify;
pub mod config;
pub mod controller;
pub mod dealer;
pub mod demand;
pub mod digest;
pub mod estimate;
pub mod limits;
pub mod metrics;
pub mod queueset;
pub mod retry_after;

pub use controller::{Admitted, FlowControl, Rejected};
pub use digest::{ListShape, RequestDigest, ResourceTarget, Target};
