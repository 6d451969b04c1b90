//! TaintToleration: a node's NoSchedule and NoExecute taints must be
//! tolerated; its PreferNoSchedule taints that are not lower its score.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;

use crate::framework::normalize::default_normalize;
use crate::framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventResource, FilterPlugin, Plugin,
    PluginContext, PreScorePlugin, ScorePlugin, Snapshot, Status,
};
use crate::model::taint::{
    first_untolerated, tolerated_by, NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE,
};
use crate::model::{NodeInfo, PodInfo};

pub struct TaintToleration;

/// What may make a node's taints acceptable: a new node, changed taints, or
/// new tolerations on the pod.
pub fn taint_events() -> Vec<ClusterEvent> {
    vec![
        ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD.or(ActionType::UPDATE_NODE_TAINT),
        ),
        ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_TOLERATION,
        ),
    ]
}

const STATE_KEY: &str = "PreScoreTaintToleration";

/// The pod's tolerations that can tolerate a PreferNoSchedule taint.
#[derive(Clone)]
struct PreferTolerations(Vec<Toleration>);

impl TaintToleration {
    pub const NAME: &'static str = "TaintToleration";

    pub fn factory(_: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        Ok(Arc::new(TaintToleration))
    }
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        taint_events()
    }
    crate::serves!(filter, pre_score, score);
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match first_untolerated(node.taints(), pod.tolerations(), &[NO_SCHEDULE, NO_EXECUTE]) {
            None => Status::success(),
            Some(taint) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            )),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        let tolerations = pod
            .tolerations()
            .iter()
            .filter(|t| {
                t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == PREFER_NO_SCHEDULE)
            })
            .cloned()
            .collect();
        state.write(STATE_KEY, PreferTolerations(tolerations));
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let tolerations = state
            .read::<PreferTolerations>(STATE_KEY)
            .map(|t| t.0.as_slice())
            .unwrap_or_default();
        let intolerable = node
            .taints()
            .iter()
            .filter(|t| t.effect == PREFER_NO_SCHEDULE && !tolerated_by(t, tolerations))
            .count();
        Ok(intolerable as i64)
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, _: &[Arc<NodeInfo>], scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::model::testing::{toleration, NodeBuilder, PodBuilder};

    #[test]
    fn filter_table() {
        let cases = [
            (
                "no taints",
                NodeBuilder::new("n"),
                PodBuilder::new("p"),
                Code::Success,
                "",
            ),
            (
                "untolerated NoSchedule",
                NodeBuilder::new("n").taint("dedicated", "gpu", NO_SCHEDULE),
                PodBuilder::new("p"),
                Code::UnschedulableAndUnresolvable,
                "node(s) had untolerated taint {dedicated: gpu}",
            ),
            (
                "tolerated",
                NodeBuilder::new("n").taint("dedicated", "gpu", NO_SCHEDULE),
                PodBuilder::new("p").toleration(toleration(
                    "dedicated",
                    "Equal",
                    "gpu",
                    NO_SCHEDULE,
                )),
                Code::Success,
                "",
            ),
            (
                "PreferNoSchedule never filters",
                NodeBuilder::new("n").taint("soft", "", PREFER_NO_SCHEDULE),
                PodBuilder::new("p"),
                Code::Success,
                "",
            ),
            (
                "NoExecute filters, empty value printed empty",
                NodeBuilder::new("n").taint("node.kubernetes.io/not-ready", "", NO_EXECUTE),
                PodBuilder::new("p"),
                Code::UnschedulableAndUnresolvable,
                "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
            ),
        ];
        for (name, node, pod, code, message) in cases {
            let status =
                TaintToleration.filter(&CycleState::new(), &pod.info(), &node.info_with(&[]));
            assert_eq!(
                (status.code, status.message().as_str()),
                (code, message),
                "{name}"
            );
        }
    }

    #[test]
    fn score_prefers_fewer_untolerated_soft_taints() {
        let nodes: Vec<Arc<NodeInfo>> = [
            NodeBuilder::new("clean"),
            NodeBuilder::new("one").taint("a", "", PREFER_NO_SCHEDULE),
            NodeBuilder::new("two")
                .taint("a", "", PREFER_NO_SCHEDULE)
                .taint("b", "", PREFER_NO_SCHEDULE),
            NodeBuilder::new("tolerated").taint("c", "", PREFER_NO_SCHEDULE),
        ]
        .into_iter()
        .map(|b| Arc::new(b.info_with(&[])))
        .collect();
        let pod = PodBuilder::new("p")
            .toleration(toleration("c", "Exists", "", PREFER_NO_SCHEDULE))
            .info();
        let mut state = CycleState::new();
        TaintToleration.pre_score(&mut state, &pod, &nodes, &Snapshot::default());
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| TaintToleration.score(&state, &pod, n).unwrap())
            .collect();
        TaintToleration.normalize(&state, &pod, &nodes, &mut scores);
        assert_eq!(scores, vec![100, 50, 0, 100]);
    }
}
