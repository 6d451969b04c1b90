//! A pod on a simulated node: what its annotations ask for, what it
//! requests, whether the node admits it, and its life as pure functions
//! of the pod and the time.

pub mod admission;
pub mod annotations;
pub mod conditions;
pub mod container;
pub mod lifecycle;
pub mod resources;
pub mod termination;
