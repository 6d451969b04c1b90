//! The scheduling framework: extension points, the plugin registry, profiles
//! built from the configuration, and the runs of each point.

pub mod build;
pub mod cycle_state;
pub mod diagnosis;
pub mod events;
pub mod handle;
pub mod interface;
pub mod normalize;
pub mod num_nodes;
pub mod registry;
pub mod runtime;
pub mod snapshot;
pub mod status;

pub use cycle_state::CycleState;
pub use diagnosis::{Diagnosis, FitError, NodeStatuses};
pub use events::{ActionType, ClusterEvent, EventResource};
pub use handle::{ClusterLister, StaticLister};
pub use interface::*;
pub use registry::{ArgsError, PluginContext, Registry};
pub use runtime::Framework;
pub use snapshot::Snapshot;
pub use status::{Code, Status};
