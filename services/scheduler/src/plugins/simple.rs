//! The small plugins: SchedulingGates, PrioritySort, NodeUnschedulable,
//! NodeName and DefaultBinder.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;

use crate::framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventResource, FilterPlugin, Plugin,
    PluginContext, PreEnqueuePlugin, Status,
};
use crate::model::taint::{tolerated_by, NO_SCHEDULE, UNSCHEDULABLE_TAINT_KEY};
use crate::model::{NodeInfo, PodInfo};

/// Keeps pods with `spec.schedulingGates` out of the activeQ until the gates are removed.
pub struct SchedulingGates;

impl SchedulingGates {
    pub const NAME: &'static str = "SchedulingGates";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(SchedulingGates))
    }
}

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        )]
    }
    crate::serves!(pre_enqueue);
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates = pod.spec().scheduling_gates.as_deref().unwrap_or_default();
        if gates.is_empty() {
            return Status::success();
        }
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        Status::unresolvable(format!(
            "waiting for scheduling gates: [{}]",
            names.join(" ")
        ))
    }
}

/// Orders the activeQ by priority, then by the time a pod entered the queue.
pub struct PrioritySort;

impl PrioritySort {
    pub const NAME: &'static str = "PrioritySort";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(PrioritySort))
    }
}

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn is_queue_sort(&self) -> bool {
        true
    }
}

/// Binds through the API's `pods/binding` (the core's binder does the call).
pub struct DefaultBinder;

impl DefaultBinder {
    pub const NAME: &'static str = "DefaultBinder";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(DefaultBinder))
    }
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn is_binder(&self) -> bool {
        true
    }
}

/// Refuses cordoned nodes (`spec.unschedulable`) unless the pod tolerates
/// their `node.kubernetes.io/unschedulable:NoSchedule` taint.
pub struct NodeUnschedulable;

impl NodeUnschedulable {
    pub const NAME: &'static str = "NodeUnschedulable";
    pub const REASON: &'static str = "node(s) were unschedulable";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(NodeUnschedulable))
    }
}

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        super::taint_toleration::taint_events()
    }
    crate::serves!(filter);
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable() {
            return Status::success();
        }
        let cordon = Taint {
            key: UNSCHEDULABLE_TAINT_KEY.into(),
            effect: NO_SCHEDULE.into(),
            value: None,
            time_added: None,
        };
        if tolerated_by(&cordon, pod.tolerations()) {
            return Status::success();
        }
        Status::unresolvable(Self::REASON)
    }
}

/// A pod that names its node (`spec.nodeName` set before scheduling) goes only there.
pub struct NodeName;

impl NodeName {
    pub const NAME: &'static str = "NodeName";
    pub const REASON: &'static str = "node(s) didn't match the requested node name";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(NodeName))
    }
}

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(EventResource::Node, ActionType::ADD)]
    }
    crate::serves!(filter);
}

impl FilterPlugin for NodeName {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.node_name() {
            Some(wanted) if wanted != node.name => Status::unresolvable(Self::REASON),
            _ => Status::success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::model::testing::{toleration, NodeBuilder, PodBuilder};

    #[test]
    fn scheduling_gates_table() {
        let cases = [
            ("no gates", PodBuilder::new("p"), Code::Success, ""),
            (
                "one gate",
                PodBuilder::new("p").gate("a"),
                Code::UnschedulableAndUnresolvable,
                "waiting for scheduling gates: [a]",
            ),
            (
                "two gates",
                PodBuilder::new("p").gate("a").gate("b"),
                Code::UnschedulableAndUnresolvable,
                "waiting for scheduling gates: [a b]",
            ),
        ];
        for (name, pod, code, message) in cases {
            let status = SchedulingGates.pre_enqueue(&pod.info());
            assert_eq!(status.code, code, "{name}");
            assert_eq!(status.message(), message, "{name}");
        }
    }

    #[test]
    fn node_unschedulable_table() {
        let tolerate = toleration(UNSCHEDULABLE_TAINT_KEY, "Exists", "", NO_SCHEDULE);
        let cases = [
            (
                "schedulable node",
                NodeBuilder::new("n"),
                PodBuilder::new("p"),
                Code::Success,
            ),
            (
                "cordoned node",
                NodeBuilder::new("n").unschedulable(),
                PodBuilder::new("p"),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "cordoned node, tolerated",
                NodeBuilder::new("n").unschedulable(),
                PodBuilder::new("p").toleration(tolerate),
                Code::Success,
            ),
        ];
        for (name, node, pod, code) in cases {
            let status =
                NodeUnschedulable.filter(&CycleState::new(), &pod.info(), &node.info_with(&[]));
            assert_eq!(status.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(status.message(), NodeUnschedulable::REASON);
            }
        }
    }

    #[test]
    fn node_name_table() {
        let node = NodeBuilder::new("n1").info_with(&[]);
        let cases = [
            ("no node name", PodBuilder::new("p"), Code::Success),
            ("this node", PodBuilder::new("p").node("n1"), Code::Success),
            (
                "another node",
                PodBuilder::new("p").node("n2"),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, code) in cases {
            assert_eq!(
                NodeName.filter(&CycleState::new(), &pod.info(), &node).code,
                code,
                "{name}"
            );
        }
    }
}
