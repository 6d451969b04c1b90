//! autoscaling: HorizontalPodAutoscalers in v2 (stored) and v1,
//! converted between them.

pub mod conversion;
pub mod v1;
pub mod v2;
