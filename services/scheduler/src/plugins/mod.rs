//! The default profile's plugins, one module each, and the in-tree registry.

pub mod image_locality;
pub mod inter_pod_affinity;
pub mod memo;
pub mod node_affinity;
pub mod node_ports;
pub mod node_resources;
pub mod pod_topology_spread;
pub mod simple;
pub mod taint_toleration;

use crate::framework::Registry;

/// Registers every plugin of this layer by kube's names.
pub fn register_all(registry: &mut Registry) {
    registry.register(
        simple::SchedulingGates::NAME,
        simple::SchedulingGates::factory,
    );
    registry.register(simple::PrioritySort::NAME, simple::PrioritySort::factory);
    registry.register(
        simple::NodeUnschedulable::NAME,
        simple::NodeUnschedulable::factory,
    );
    registry.register(simple::NodeName::NAME, simple::NodeName::factory);
    registry.register(simple::DefaultBinder::NAME, simple::DefaultBinder::factory);
    registry.register(
        taint_toleration::TaintToleration::NAME,
        taint_toleration::TaintToleration::factory,
    );
    registry.register(
        node_affinity::NodeAffinity::NAME,
        node_affinity::NodeAffinity::factory,
    );
    registry.register(node_ports::NodePorts::NAME, node_ports::NodePorts::factory);
    registry.register(
        node_resources::NodeResourcesFit::NAME,
        node_resources::NodeResourcesFit::factory,
    );
    registry.register(
        node_resources::BalancedAllocation::NAME,
        node_resources::BalancedAllocation::factory,
    );
    registry.register(
        image_locality::ImageLocality::NAME,
        image_locality::ImageLocality::factory,
    );
    registry.register(
        pod_topology_spread::PodTopologySpread::NAME,
        pod_topology_spread::PodTopologySpread::factory,
    );
    registry.register(
        inter_pod_affinity::InterPodAffinity::NAME,
        inter_pod_affinity::InterPodAffinity::factory,
    );
}
