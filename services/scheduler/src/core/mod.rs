//! The scheduler proper: scheduling cycles, binding cycles, failure
//! reporting, preemption's evictions, the informers' event handlers, and
//! metrics. Its writes go through `SchedulerApi`.

pub mod algorithm;
pub mod api;
mod handlers;
pub mod memory_api;
pub mod metrics;
pub mod profiles;
pub mod scheduler;

pub use api::{ApiError, ApiResult, EventType, PodRef, SchedulerApi, SchedulerEvent, StatusPatch};
pub use scheduler::Scheduler;

#[cfg(test)]
mod tests;
