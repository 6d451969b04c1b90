//! core/v1 Pod: its strategy, the validation of pod specs every kind
//! with a pod template shares, and its subresources: `binding` (how a
//! scheduler places it), `eviction` (a delete that honours disruption
//! budgets) and those a kubelet serves.

pub mod binding;
pub mod eviction;
pub mod kubelet;
pub mod log_options;
pub mod strategy;
pub mod validation;
