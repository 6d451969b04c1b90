//! Cluster events, and which of them may make a rejected pod schedulable
//! (kube's ClusterEvent / ActionType, reduced to what the default plugins use).

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventResource {
    /// Any pod: matches AssignedPod and UnscheduledPod.
    Pod,
    AssignedPod,
    UnscheduledPod,
    Node,
    Namespace,
    /// Anything (the unschedulable pods' periodic flush, a forced activation).
    WildCard,
}

/// How it changed, as bits: an event carries the precise bits, a plugin
/// registers the bits it cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionType(pub u32);

impl ActionType {
    pub const ADD: ActionType = ActionType(1);
    pub const DELETE: ActionType = ActionType(1 << 1);
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 6);
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 7);
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 8);
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 9);
    /// Any other update.
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 10);
    pub const UPDATE: ActionType = ActionType(0b111_1111_1100);
    pub const ALL: ActionType = ActionType(u32::MAX);

    pub const fn or(self, other: ActionType) -> ActionType {
        ActionType(self.0 | other.0)
    }

    pub const fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: ActionType) -> ClusterEvent {
        ClusterEvent { resource, action }
    }

    /// The periodic flush of pods unschedulable for too long.
    pub const UNSCHEDULABLE_TIMEOUT: ClusterEvent =
        ClusterEvent::new(EventResource::WildCard, ActionType::ALL);

    /// Whether a plugin that registered `self` cares about `incoming`.
    pub fn matches(&self, incoming: &ClusterEvent) -> bool {
        let resource_matches = match self.resource {
            EventResource::WildCard => true,
            EventResource::Pod => matches!(
                incoming.resource,
                EventResource::Pod | EventResource::AssignedPod | EventResource::UnscheduledPod
            ),
            resource => resource == incoming.resource,
        };
        resource_matches && self.action.intersects(incoming.action)
    }

    /// kube's label for metrics, e.g. `NodeAdd`, `AssignedPodDelete`.
    pub fn label(&self) -> String {
        if self.resource == EventResource::WildCard {
            return "UnschedulableTimeout".into();
        }
        let action = match self.action {
            ActionType::ADD => "Add",
            ActionType::DELETE => "Delete",
            ActionType::UPDATE_NODE_ALLOCATABLE => "UpdateNodeAllocatable",
            ActionType::UPDATE_NODE_LABEL => "UpdateNodeLabel",
            ActionType::UPDATE_NODE_TAINT => "UpdateNodeTaint",
            ActionType::UPDATE_NODE_CONDITION => "UpdateNodeCondition",
            ActionType::UPDATE_POD_LABEL => "UpdatePodLabel",
            ActionType::UPDATE_POD_SCALE_DOWN => "UpdatePodScaleDown",
            ActionType::UPDATE_POD_TOLERATION => "UpdatePodToleration",
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED => {
                "UpdatePodSchedulingGatesEliminated"
            }
            _ => "Update",
        };
        format!("{:?}{action}", self.resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_events_match_more_specific_incoming_ones() {
        let node_add_or_taint = ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD.or(ActionType::UPDATE_NODE_TAINT),
        );
        assert!(node_add_or_taint.matches(&ClusterEvent::new(EventResource::Node, ActionType::ADD)));
        assert!(node_add_or_taint.matches(&ClusterEvent::new(
            EventResource::Node,
            ActionType::UPDATE_NODE_TAINT
        )));
        assert!(!node_add_or_taint.matches(&ClusterEvent::new(
            EventResource::Node,
            ActionType::UPDATE_NODE_LABEL
        )));
        let any_pod_delete = ClusterEvent::new(EventResource::Pod, ActionType::DELETE);
        assert!(any_pod_delete.matches(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::DELETE
        )));
        assert!(
            !any_pod_delete.matches(&ClusterEvent::new(EventResource::Node, ActionType::DELETE))
        );
        assert_eq!(
            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE).label(),
            "AssignedPodDelete"
        );
    }
}
