//! The scheduler over the real API: capstan-client's informers, leader
//! election and event recorder, and `SchedulerApi` on kube-rs.

pub mod kube_api;
pub mod listers;
mod run;

pub use run::{run, RunError, COMPONENT};

#[cfg(test)]
mod tests;
