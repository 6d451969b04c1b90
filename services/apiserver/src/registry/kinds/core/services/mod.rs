//! core/v1 Service: its strategy, the cluster IPs and node ports it holds
//! alone, and the ranges it picks them from.

pub mod allocation;
pub mod ranges;
pub mod strategy;
