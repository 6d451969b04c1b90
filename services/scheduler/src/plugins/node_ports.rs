//! NodePorts: a pod's host ports must be free on the node.

use std::sync::Arc;

use crate::framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventResource, FilterPlugin, Plugin,
    PluginContext, PreFilterPlugin, Snapshot, Status,
};
use crate::model::{NodeInfo, PodInfo};

pub struct NodePorts;

pub const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

impl NodePorts {
    pub const NAME: &'static str = "NodePorts";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(NodePorts))
    }
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
            ClusterEvent::new(EventResource::Node, ActionType::ADD.or(ActionType::UPDATE)),
        ]
    }
    crate::serves!(pre_filter, filter);
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        if pod.host_ports.is_empty() {
            Status::skip()
        } else {
            Status::success()
        }
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if pod.host_ports.iter().any(|port| node.port_conflicts(port)) {
            Status::unschedulable(REASON)
        } else {
            Status::success()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::model::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn filter_table() {
        let taken = PodBuilder::new("old")
            .host_port(8080, "TCP", "127.0.0.1")
            .info();
        let node = NodeBuilder::new("n").info_with(&[taken]);
        let cases = [
            (
                "other port",
                PodBuilder::new("p").host_port(9090, "TCP", ""),
                Code::Success,
            ),
            (
                "same port, other protocol",
                PodBuilder::new("p").host_port(8080, "UDP", ""),
                Code::Success,
            ),
            (
                "same port, other address",
                PodBuilder::new("p").host_port(8080, "TCP", "127.0.0.2"),
                Code::Success,
            ),
            (
                "same port, same address",
                PodBuilder::new("p").host_port(8080, "TCP", "127.0.0.1"),
                Code::Unschedulable,
            ),
            (
                "same port, wildcard address",
                PodBuilder::new("p").host_port(8080, "TCP", ""),
                Code::Unschedulable,
            ),
        ];
        for (name, pod, code) in cases {
            let status = NodePorts.filter(&CycleState::new(), &pod.info(), &node);
            assert_eq!(status.code, code, "{name}");
        }
    }
}
