//! InterPodAffinity: required pod affinity and anti-affinity (the pod's and
//! existing pods'), and preferred terms as a score.

pub mod filtering;
pub mod namespaces;
pub mod scoring;

use std::sync::Arc;

use serde::Deserialize;

use self::filtering::FilterState;
use self::namespaces::NamespaceLabels;
use self::scoring::{ScoreArgs, ScoreState};
use crate::framework::{
    ActionType, ArgsError, ClusterEvent, ClusterLister, CycleState, EventResource, FilterPlugin,
    Plugin, PluginContext, PreFilterPlugin, PreScorePlugin, ScorePlugin, Snapshot, Status,
};
use crate::model::{NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AffinityArgs {
    hard_pod_affinity_weight: Option<i64>,
    ignore_preferred_terms_of_existing_pods: Option<bool>,
}

pub struct InterPodAffinity {
    args: ScoreArgs,
    lister: Arc<dyn ClusterLister>,
    filter_counts: NodeMemo<(filtering::Counts, filtering::Counts)>,
    score_parts: NodeMemo<scoring::TopologyScore>,
}

const FILTER_KEY: &str = "PreFilterInterPodAffinity";
const SCORE_KEY: &str = "PreScoreInterPodAffinity";

impl InterPodAffinity {
    pub const NAME: &'static str = "InterPodAffinity";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: AffinityArgs = ArgsError::decode(context.args)?;
        let weight = args.hard_pod_affinity_weight.unwrap_or(1);
        if !(0..=100).contains(&weight) {
            return Err(ArgsError::new(
                "hardPodAffinityWeight",
                format!("Invalid value: {weight}: not in valid range [0, 100]"),
            ));
        }
        Ok(Arc::new(InterPodAffinity {
            args: ScoreArgs {
                hard_pod_affinity_weight: weight,
                ignore_preferred_terms_of_existing_pods: args
                    .ignore_preferred_terms_of_existing_pods
                    .unwrap_or(false),
            },
            lister: context.lister.clone(),
            filter_counts: NodeMemo::default(),
            score_parts: NodeMemo::default(),
        }))
    }

    /// For tests: default arguments over `lister`.
    pub fn with_lister(lister: Arc<dyn ClusterLister>) -> InterPodAffinity {
        InterPodAffinity {
            args: ScoreArgs {
                hard_pod_affinity_weight: 1,
                ignore_preferred_terms_of_existing_pods: false,
            },
            lister,
            filter_counts: NodeMemo::default(),
            score_parts: NodeMemo::default(),
        }
    }
}

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::AssignedPod,
                ActionType::ADD
                    .or(ActionType::DELETE)
                    .or(ActionType::UPDATE_POD_LABEL),
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD.or(ActionType::UPDATE_NODE_LABEL),
            ),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score);
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> Status {
        let none_required =
            pod.required_affinity.is_empty() && pod.required_anti_affinity.is_empty();
        if none_required && snapshot.with_required_anti_affinity().next().is_none() {
            return Status::skip();
        }
        let mut namespaces = NamespaceLabels::new(self.lister.as_ref());
        state.write(
            FILTER_KEY,
            FilterState::compute(pod, snapshot, &mut namespaces, &self.filter_counts),
        );
        Status::success()
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &Arc<PodInfo>,
        node: &NodeInfo,
    ) {
        let mut namespaces = NamespaceLabels::new(self.lister.as_ref());
        if let Some(filter) = state.read_mut::<FilterState>(FILTER_KEY) {
            filter.update(pod, added, node, &mut namespaces, 1);
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        let mut namespaces = NamespaceLabels::new(self.lister.as_ref());
        if let Some(filter) = state.read_mut::<FilterState>(FILTER_KEY) {
            filter.update(pod, removed, node, &mut namespaces, -1);
        }
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match state.read::<FilterState>(FILTER_KEY) {
            Some(filter) => filter.filter(pod, node),
            None => Status::error("InterPodAffinity: Filter ran without PreFilter's state"),
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let has_preferences =
            !pod.preferred_affinity.is_empty() || !pod.preferred_anti_affinity.is_empty();
        if !has_preferences
            && (self.args.ignore_preferred_terms_of_existing_pods
                || snapshot.with_affinity().next().is_none())
        {
            return Status::skip();
        }
        let mut namespaces = NamespaceLabels::new(self.lister.as_ref());
        let score = ScoreState::compute(
            pod,
            snapshot,
            &self.args,
            &mut namespaces,
            &self.score_parts,
        );
        if score.topology_score.is_empty() {
            return Status::skip();
        }
        state.write(SCORE_KEY, score);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(state
            .read::<ScoreState>(SCORE_KEY)
            .map_or(0, |s| s.score(node)))
    }

    fn normalize(&self, state: &CycleState, _: &PodInfo, _: &[Arc<NodeInfo>], scores: &mut [i64]) {
        if let Some(score) = state.read::<ScoreState>(SCORE_KEY) {
            score.normalize(scores);
        }
    }
}

#[cfg(test)]
mod tests;
