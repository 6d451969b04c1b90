//! core/v1 Pod: its strategy, the validation of pod specs every kind
//! with a pod template shares, and its subresources.

pub mod strategy;
pub mod validation;
