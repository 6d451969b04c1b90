//! `Framework`: one profile's plugins, and the runs of each extension point
//! over a pod and its candidate nodes.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::build::{build_points, Placed, PointLists};
use super::cycle_state::{CycleState, SkipSet};
use super::diagnosis::NodeStatuses;
use super::events::ClusterEvent;
use super::handle::ClusterLister;
use super::interface::{
    FilterRunner, NominatedPods, PostFilterContext, PostFilterResult, MAX_NODE_SCORE,
};
use super::registry::Registry;
use super::snapshot::Snapshot;
use super::status::{Code, Status};
use crate::config::{ExtensionPoint, FieldError, ProfileConfig};
use crate::model::{NodeInfo, PodInfo};

pub struct Framework {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    points: PointLists,
}

impl Framework {
    pub fn new(
        profile: &ProfileConfig,
        registry: &Registry,
        lister: Arc<dyn ClusterLister>,
    ) -> Result<Framework, FieldError> {
        Ok(Framework {
            scheduler_name: profile.scheduler_name.clone(),
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
            points: build_points(profile, registry, &lister)?,
        })
    }

    fn at(&self, point: ExtensionPoint) -> &[Placed] {
        self.points
            .get(&point)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The names of the plugins at `point`, in order (for tests and logs).
    pub fn plugin_names(&self, point: ExtensionPoint) -> Vec<&'static str> {
        self.at(point).iter().map(|p| p.plugin.name()).collect()
    }

    /// The weight of a Score plugin.
    pub fn score_weight(&self, name: &str) -> Option<i64> {
        self.at(ExtensionPoint::Score)
            .iter()
            .find(|p| p.plugin.name() == name)
            .map(|p| p.weight)
    }

    /// Cluster events that the plugins in `plugins` registered.
    pub fn events_for(&self, plugins: &BTreeSet<&'static str>) -> Vec<ClusterEvent> {
        let mut seen = BTreeSet::new();
        let mut events = Vec::new();
        for point in ExtensionPoint::ALL {
            for placed in self.at(point) {
                let name = placed.plugin.name();
                if plugins.contains(name) && seen.insert(name) {
                    events.extend(placed.plugin.events_to_register());
                }
            }
        }
        events
    }

    /// PreEnqueue: the first rejection keeps the pod out of the activeQ.
    pub fn run_pre_enqueue(&self, pod: &PodInfo) -> Status {
        for placed in self.at(ExtensionPoint::PreEnqueue) {
            let plugin = placed
                .plugin
                .as_pre_enqueue()
                .expect("placed by capability");
            let status = plugin.pre_enqueue(pod);
            if !status.is_success() {
                return status.with_plugin(placed.plugin.name());
            }
        }
        Status::success()
    }

    /// PreFilter: a Skip turns that plugin's Filter off; the first rejection ends the cycle.
    pub fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> Status {
        for placed in self.at(ExtensionPoint::PreFilter) {
            let name = placed.plugin.name();
            let status = placed
                .plugin
                .as_pre_filter()
                .expect("placed")
                .pre_filter(state, pod, snapshot);
            if let Some(failure) = skip_or_fail(status, name, &mut state.skip_filter) {
                return failure;
            }
        }
        Status::success()
    }

    /// Preemption's dry run added `added` to `node`: each PreFilter updates its state.
    pub fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &Arc<PodInfo>,
        node: &NodeInfo,
    ) {
        for placed in self.at(ExtensionPoint::PreFilter) {
            if !state.skip_filter.contains(placed.plugin.name()) {
                placed
                    .plugin
                    .as_pre_filter()
                    .expect("placed")
                    .add_pod(state, pod, added, node);
            }
        }
    }

    pub fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        for placed in self.at(ExtensionPoint::PreFilter) {
            if !state.skip_filter.contains(placed.plugin.name()) {
                placed
                    .plugin
                    .as_pre_filter()
                    .expect("placed")
                    .remove_pod(state, pod, removed, node);
            }
        }
    }

    /// Filter: the first failing plugin's status, or success.
    pub fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for placed in self.at(ExtensionPoint::Filter) {
            let name = placed.plugin.name();
            if state.skip_filter.contains(name) {
                continue;
            }
            let status = placed
                .plugin
                .as_filter()
                .expect("placed")
                .filter(state, pod, node);
            if !status.is_success() {
                return status.with_plugin(name);
            }
        }
        Status::success()
    }

    /// Filter with the pods nominated to `node` that outrank `pod` counted as
    /// if they ran there (kube's `RunFilterPluginsWithNominatedPods`): the
    /// pod must fit both with them and, since they may go elsewhere, without.
    pub fn run_filter_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        nominated: &dyn NominatedPods,
    ) -> Status {
        let outranking: Vec<Arc<PodInfo>> = nominated
            .nominated_for(&node.name)
            .into_iter()
            .filter(|p| p.priority >= pod.priority && p.key != pod.key)
            .collect();
        if outranking.is_empty() {
            return self.run_filter(state, pod, node);
        }
        let mut with_nominated_state = state.clone();
        let mut with_nominated = node.clone();
        for other in outranking {
            with_nominated.add_pod(other.clone());
            self.run_pre_filter_add_pod(&mut with_nominated_state, pod, &other, &with_nominated);
        }
        let status = self.run_filter(&with_nominated_state, pod, &with_nominated);
        if !status.is_success() {
            return status;
        }
        self.run_filter(state, pod, node)
    }

    pub fn has_post_filter(&self) -> bool {
        !self.at(ExtensionPoint::PostFilter).is_empty()
    }

    /// PostFilter (preemption): the first plugin that finds a way wins.
    pub fn run_post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        statuses: &NodeStatuses,
        context: &PostFilterContext,
    ) -> (Option<PostFilterResult>, Status) {
        let mut last = (None, Status::unschedulable(""));
        for placed in self.at(ExtensionPoint::PostFilter) {
            let (result, status) = placed
                .plugin
                .as_post_filter()
                .expect("placed")
                .post_filter(state, pod, statuses, context);
            if status.is_success() {
                return (result, status);
            }
            last = (result, status.with_plugin(placed.plugin.name()));
        }
        last
    }

    /// PreScore over the feasible nodes; a Skip turns that plugin's Score off.
    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        for placed in self.at(ExtensionPoint::PreScore) {
            let name = placed.plugin.name();
            let status = placed
                .plugin
                .as_pre_score()
                .expect("placed")
                .pre_score(state, pod, nodes, snapshot);
            if let Some(failure) = skip_or_fail(status, name, &mut state.skip_score) {
                return failure;
            }
        }
        Status::success()
    }

    /// Score: each plugin's scores normalized, weighted and summed per node.
    pub fn run_score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<i64>, Status> {
        let mut totals = vec![0i64; nodes.len()];
        let mut scores = vec![0i64; nodes.len()];
        for placed in self.at(ExtensionPoint::Score) {
            let name = placed.plugin.name();
            if state.skip_score.contains(name) {
                continue;
            }
            let plugin = placed.plugin.as_score().expect("placed");
            for (score, node) in scores.iter_mut().zip(nodes) {
                *score = plugin
                    .score(state, pod, node)
                    .map_err(|s| s.with_plugin(name))?;
            }
            plugin.normalize(state, pod, nodes, &mut scores);
            for (total, score) in totals.iter_mut().zip(&scores) {
                if !(0..=MAX_NODE_SCORE).contains(score) {
                    return Err(Status::error(format!(
                        "plugin {name:?} returns an invalid score {score}, it should in the range of [0, {MAX_NODE_SCORE}] after normalizing"
                    )));
                }
                *total += score * placed.weight;
            }
        }
        Ok(totals)
    }

    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for placed in self.at(ExtensionPoint::Reserve) {
            let status = placed
                .plugin
                .as_reserve()
                .expect("placed")
                .reserve(state, pod, node);
            if !status.is_success() {
                return status.with_plugin(placed.plugin.name());
            }
        }
        Status::success()
    }

    /// Unreserve, in reverse order (kube's rule).
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for placed in self.at(ExtensionPoint::Reserve).iter().rev() {
            placed
                .plugin
                .as_reserve()
                .expect("placed")
                .unreserve(state, pod, node);
        }
    }

    pub fn run_permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for placed in self.at(ExtensionPoint::Permit) {
            let status = placed
                .plugin
                .as_permit()
                .expect("placed")
                .permit(state, pod, node);
            if !status.is_success() {
                return status.with_plugin(placed.plugin.name());
            }
        }
        Status::success()
    }
}

/// A Pre* plugin's answer: Skip turns its main point off for the cycle;
/// anything but success ends the run.
fn skip_or_fail(status: Status, name: &'static str, skipped: &mut SkipSet) -> Option<Status> {
    match status.code {
        Code::Success => None,
        Code::Skip => {
            skipped.insert(name);
            None
        }
        _ => Some(status.with_plugin(name)),
    }
}

impl FilterRunner for Framework {
    fn run_filter_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        nominated: &dyn NominatedPods,
    ) -> Status {
        Framework::run_filter_with_nominated(self, state, pod, node, nominated)
    }

    fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &Arc<PodInfo>,
        node: &NodeInfo,
    ) {
        Framework::run_pre_filter_add_pod(self, state, pod, added, node)
    }

    fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        Framework::run_pre_filter_remove_pod(self, state, pod, removed, node)
    }
}
