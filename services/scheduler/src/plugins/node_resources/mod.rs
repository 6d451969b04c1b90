//! NodeResourcesFit and NodeResourcesBalancedAllocation.

pub mod allocation;
pub mod balanced;
pub mod fit;
pub mod strategy;

pub use balanced::BalancedAllocation;
pub use fit::NodeResourcesFit;
