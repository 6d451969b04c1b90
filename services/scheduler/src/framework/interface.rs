//! The extension points. A plugin implements `Plugin` and answers the
//! `as_*` accessors of the points it serves; the framework calls them in the
//! profile's order. Plugins do no I/O: what needs the API (binding, deleting
//! preemption victims) is returned as data and done by the core.

use std::sync::Arc;

use super::cycle_state::CycleState;
use super::diagnosis::NodeStatuses;
use super::events::ClusterEvent;
use super::snapshot::Snapshot;
use super::status::Status;
use crate::model::{NodeInfo, PodInfo};

/// The highest score a Score plugin gives after normalization.
pub const MAX_NODE_SCORE: i64 = 100;

pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;

    /// Cluster events that may make a pod this plugin rejected schedulable.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// Whether this plugin orders the activeQ (only PrioritySort does).
    fn is_queue_sort(&self) -> bool {
        false
    }
    /// Whether this plugin binds (only DefaultBinder, done by the core's binder).
    fn is_binder(&self) -> bool {
        false
    }
}

/// Inside `impl Plugin for X`: declares the extension points X serves,
/// e.g. `serves!(pre_filter, filter, score);` (X implements those traits).
#[macro_export]
macro_rules! serves {
    ($($point:ident),+ $(,)?) => { $( $crate::serves!(@point $point); )+ };
    (@point pre_enqueue) => { fn as_pre_enqueue(&self) -> Option<&dyn $crate::framework::PreEnqueuePlugin> { Some(self) } };
    (@point pre_filter) => { fn as_pre_filter(&self) -> Option<&dyn $crate::framework::PreFilterPlugin> { Some(self) } };
    (@point filter) => { fn as_filter(&self) -> Option<&dyn $crate::framework::FilterPlugin> { Some(self) } };
    (@point post_filter) => { fn as_post_filter(&self) -> Option<&dyn $crate::framework::PostFilterPlugin> { Some(self) } };
    (@point pre_score) => { fn as_pre_score(&self) -> Option<&dyn $crate::framework::PreScorePlugin> { Some(self) } };
    (@point score) => { fn as_score(&self) -> Option<&dyn $crate::framework::ScorePlugin> { Some(self) } };
    (@point reserve) => { fn as_reserve(&self) -> Option<&dyn $crate::framework::ReservePlugin> { Some(self) } };
    (@point permit) => { fn as_permit(&self) -> Option<&dyn $crate::framework::PermitPlugin> { Some(self) } };
}

/// Runs before a pod enters the activeQ; a rejection keeps it out (scheduling gates).
pub trait PreEnqueuePlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

pub trait PreFilterPlugin {
    /// Computes the cycle's state for `pod`; `Skip` turns this plugin's Filter off.
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> Status;

    /// Preemption's dry run added `added` to `node`: update the state.
    fn add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _added: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) {
    }

    /// Preemption's dry run removed `removed` from `node`: update the state.
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _removed: &PodInfo,
        _node: &NodeInfo,
    ) {
    }
}

pub trait FilterPlugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// What a PostFilter (preemption) decided: a node to nominate and the pods to
/// delete there, or, with `nominated_node` None and `clear_nomination`, that
/// the pod's earlier nomination no longer holds.
#[derive(Debug, Clone, Default)]
pub struct PostFilterResult {
    pub nominated_node: Option<String>,
    pub victims: Vec<Arc<PodInfo>>,
    pub clear_nomination: bool,
    /// Lower-priority pods nominated to the chosen node, whose nomination is cleared.
    pub displaced_nominations: Vec<Arc<PodInfo>>,
}

/// The profile's filters, as preemption's dry runs need them.
pub trait FilterRunner {
    /// Filter, counting the nominated pods that outrank `pod`.
    fn run_filter_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        nominated: &dyn NominatedPods,
    ) -> Status;
    /// Each PreFilter's state learns that `added` now runs on `node`.
    fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &Arc<PodInfo>,
        node: &NodeInfo,
    );
    /// Each PreFilter's state learns that `removed` left `node`.
    fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    );
}

/// What a PostFilter plugin may use besides the cycle's state.
pub struct PostFilterContext<'a> {
    pub snapshot: &'a Snapshot,
    pub framework: &'a dyn FilterRunner,
    pub nominated: &'a dyn NominatedPods,
}

pub trait PostFilterPlugin {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeStatuses,
        context: &PostFilterContext,
    ) -> (Option<PostFilterResult>, Status);
}

pub trait PreScorePlugin {
    /// Prepares scoring over `nodes` (the feasible ones); `Skip` turns Score off.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status;
}

pub trait ScorePlugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// Brings the scores of all feasible nodes (`nodes`, in the same order)
    /// into 0..=MAX_NODE_SCORE.
    fn normalize(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        _scores: &mut [i64],
    ) {
    }
}

pub trait ReservePlugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

pub trait PermitPlugin {
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// Pods nominated to nodes by earlier preemptions, which the filters must
/// count as if they were there when they outrank the pod being scheduled.
pub trait NominatedPods: Send + Sync {
    fn nominated_for(&self, node: &str) -> Vec<Arc<PodInfo>>;
}

/// No nominated pods.
pub struct NoNominatedPods;

impl NominatedPods for NoNominatedPods {
    fn nominated_for(&self, _node: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }
}
