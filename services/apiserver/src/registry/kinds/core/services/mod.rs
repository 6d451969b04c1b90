//! core/v1 Service: its strategy and the ranges it picks cluster IPs and
//! node ports from.

pub mod ranges;
pub mod strategy;
