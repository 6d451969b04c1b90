//! core/v1 ServiceAccount: its strategy and its `/token` subresource.

pub mod strategy;
pub mod token;
