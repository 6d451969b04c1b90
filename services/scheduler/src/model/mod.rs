//! The scheduler's view of the objects it reads: quantities, resource
//! vectors, selectors, taints, and the precomputed `PodInfo` / `NodeInfo`.

pub mod label_digest;
pub mod node_info;
pub mod pod_info;
pub mod quantity;
pub mod resource;
pub mod selector;
pub mod taint;

pub mod testing;

pub use node_info::{normalized_image_name, NodeInfo};
pub use pod_info::{pod_key, AffinityTerm, HostPort, PodInfo, WeightedTerm};
pub use resource::Resource;
pub use selector::{labels_of, LabelMatcher, Labels};
