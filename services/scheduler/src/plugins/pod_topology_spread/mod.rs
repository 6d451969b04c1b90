//! PodTopologySpread: spreads matching pods over topology domains (zones,
//! hosts), as a hard rule (DoNotSchedule) and as a preference
//! (ScheduleAnyway; with kube's system defaults when a pod has none).

pub mod constraints;
pub mod filtering;
pub mod scoring;

use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use self::constraints::{constraints_for, system_defaults, DO_NOT_SCHEDULE, SCHEDULE_ANYWAY};
use self::filtering::FilterState;
use self::scoring::ScoreState;
use crate::framework::{
    ActionType, ArgsError, ClusterEvent, ClusterLister, CycleState, EventResource, FilterPlugin,
    Plugin, PluginContext, PreFilterPlugin, PreScorePlugin, ScorePlugin, Snapshot, Status,
};
use crate::model::{NodeInfo, PodInfo};
use crate::plugins::memo::NodeMemo;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpreadArgs {
    default_constraints: Option<Vec<TopologySpreadConstraint>>,
    defaulting_type: Option<String>,
}

pub struct PodTopologySpread {
    defaults: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
    lister: Arc<dyn ClusterLister>,
    /// Matching pods per node, by namespace and selector (Filter's and
    /// Score's constraints usually share their selector).
    counts: NodeMemo<u32>,
}

const FILTER_KEY: &str = "PreFilterPodTopologySpread";
const SCORE_KEY: &str = "PreScorePodTopologySpread";

impl PodTopologySpread {
    pub const NAME: &'static str = "PodTopologySpread";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: SpreadArgs = ArgsError::decode(context.args)?;
        let given = args.default_constraints.unwrap_or_default();
        let (defaults, system_defaulted) = match args.defaulting_type.as_deref().unwrap_or("System") {
            "System" if !given.is_empty() => {
                return Err(ArgsError::new(
                    "defaultConstraints",
                    "Invalid value: when .defaultingType is \"System\", .defaultConstraints must be empty",
                ))
            }
            "System" => (system_defaults(), true),
            "List" => (check_defaults(given)?, false),
            other => {
                return Err(ArgsError::new(
                    "defaultingType",
                    format!("Unsupported value: {other:?}: supported values: \"System\", \"List\""),
                ))
            }
        };
        Ok(Arc::new(PodTopologySpread {
            defaults,
            system_defaulted,
            lister: context.lister.clone(),
            counts: NodeMemo::default(),
        }))
    }

    /// For tests: the plugin with the system defaults over `lister`.
    pub fn with_lister(lister: Arc<dyn ClusterLister>) -> PodTopologySpread {
        PodTopologySpread {
            defaults: system_defaults(),
            system_defaulted: true,
            lister,
            counts: NodeMemo::default(),
        }
    }
}

fn check_defaults(
    constraints: Vec<TopologySpreadConstraint>,
) -> Result<Vec<TopologySpreadConstraint>, ArgsError> {
    for (i, c) in constraints.iter().enumerate() {
        let field = |name: &str| format!("defaultConstraints[{i}].{name}");
        if c.max_skew <= 0 {
            return Err(ArgsError::new(
                field("maxSkew"),
                format!("Invalid value: {}: must be greater than zero", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            return Err(ArgsError::new(
                field("topologyKey"),
                "Required value: can not be empty",
            ));
        }
        if c.when_unsatisfiable != DO_NOT_SCHEDULE && c.when_unsatisfiable != SCHEDULE_ANYWAY {
            return Err(ArgsError::new(
                field("whenUnsatisfiable"),
                format!("Unsupported value: {:?}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"", c.when_unsatisfiable),
            ));
        }
        if c.label_selector.is_some() {
            return Err(ArgsError::new(
                field("labelSelector"),
                "Forbidden: constraint must not define a selector, as they deduced for each pod",
            ));
        }
    }
    Ok(constraints)
}

impl Plugin for PodTopologySpread {
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
                ActionType::ADD
                    .or(ActionType::DELETE)
                    .or(ActionType::UPDATE_NODE_LABEL)
                    .or(ActionType::UPDATE_NODE_TAINT),
            ),
        ]
    }
    crate::serves!(pre_filter, filter, pre_score, score);
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snapshot: &Snapshot) -> Status {
        let constraints =
            constraints_for(pod, DO_NOT_SCHEDULE, &self.defaults, self.lister.as_ref());
        if constraints.is_empty() {
            return Status::skip();
        }
        state.write(
            FILTER_KEY,
            FilterState::compute(pod, constraints, snapshot.nodes(), &self.counts),
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
        if let Some(filter) = state.read_mut::<FilterState>(FILTER_KEY) {
            filter.update(pod, added, node, 1);
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &PodInfo,
        node: &NodeInfo,
    ) {
        if let Some(filter) = state.read_mut::<FilterState>(FILTER_KEY) {
            filter.update(pod, removed, node, -1);
        }
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match state.read::<FilterState>(FILTER_KEY) {
            Some(filter) => filter.filter(pod, node),
            None => Status::error("PodTopologySpread: Filter ran without PreFilter's state"),
        }
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        feasible: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let constraints =
            constraints_for(pod, SCHEDULE_ANYWAY, &self.defaults, self.lister.as_ref());
        if constraints.is_empty() || feasible.is_empty() {
            return Status::skip();
        }
        let own = pod
            .spec()
            .topology_spread_constraints
            .as_ref()
            .is_some_and(|c| !c.is_empty());
        let require_all_keys = own || !self.system_defaulted;
        state.write(
            SCORE_KEY,
            ScoreState::compute(
                pod,
                constraints,
                feasible,
                snapshot.nodes(),
                require_all_keys,
                &self.counts,
            ),
        );
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(state
            .read::<ScoreState>(SCORE_KEY)
            .map_or(0, |s| s.score(node)))
    }

    fn normalize(
        &self,
        state: &CycleState,
        _: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) {
        if let Some(score_state) = state.read::<ScoreState>(SCORE_KEY) {
            score_state.normalize(nodes, scores);
        }
    }
}

#[cfg(test)]
mod tests;
