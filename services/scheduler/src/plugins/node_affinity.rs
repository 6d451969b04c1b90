//! NodeAffinity: `nodeSelector` and required node affinity (plus the
//! profile's `addedAffinity`) must match; preferred terms add their weights.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeAffinity as NodeAffinitySpec, PreferredSchedulingTerm};
use serde::Deserialize;

use crate::framework::normalize::default_normalize;
use crate::framework::{
    ActionType, ArgsError, ClusterEvent, CycleState, EventResource, FilterPlugin, Plugin,
    PluginContext, PreFilterPlugin, PreScorePlugin, ScorePlugin, Snapshot, Status,
};
use crate::model::selector::{NodeTerm, NodeTerms};
use crate::model::{Labels, NodeInfo, PodInfo};

pub const REASON: &str = "node(s) didn't match Pod's node affinity/selector";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeAffinityArgs {
    added_affinity: Option<NodeAffinitySpec>,
}

pub struct NodeAffinity {
    added_required: Option<NodeTerms>,
    added_preferred: Vec<(NodeTerm, i64)>,
}

/// What a pod requires of a node: its `nodeSelector` pairs and required terms.
#[derive(Clone, Default)]
pub struct RequiredNodeAffinity {
    selector: Labels,
    terms: Option<NodeTerms>,
}

impl RequiredNodeAffinity {
    pub fn of(pod: &PodInfo) -> RequiredNodeAffinity {
        let spec = pod.spec();
        let terms = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(NodeTerms::compile);
        RequiredNodeAffinity {
            selector: spec.node_selector.clone().unwrap_or_default(),
            terms,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.selector.is_empty() && self.terms.is_none()
    }

    pub fn matches(&self, node: &NodeInfo) -> bool {
        let labels = node.labels();
        self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self
                .terms
                .as_ref()
                .is_none_or(|t| t.matches(&node.name, labels))
    }
}

const FILTER_KEY: &str = "PreFilterNodeAffinity";
const SCORE_KEY: &str = "PreScoreNodeAffinity";

#[derive(Clone)]
struct PreferredTerms(Vec<(NodeTerm, i64)>);

impl NodeAffinity {
    pub const NAME: &'static str = "NodeAffinity";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: NodeAffinityArgs = ArgsError::decode(context.args)?;
        let added = args.added_affinity.unwrap_or_default();
        Ok(Arc::new(NodeAffinity {
            added_required: added
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(NodeTerms::compile),
            added_preferred: preferred(
                added
                    .preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
            ),
        }))
    }
}

fn preferred(terms: Option<&[PreferredSchedulingTerm]>) -> Vec<(NodeTerm, i64)> {
    terms
        .unwrap_or_default()
        .iter()
        .filter(|t| t.weight != 0)
        .map(|t| (NodeTerm::compile(&t.preference), i64::from(t.weight)))
        .collect()
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD.or(ActionType::UPDATE_NODE_LABEL),
        )]
    }
    crate::serves!(pre_filter, filter, pre_score, score);
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        let required = RequiredNodeAffinity::of(pod);
        if required.is_empty() && self.added_required.is_none() {
            return Status::skip();
        }
        state.write(FILTER_KEY, required);
        Status::success()
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(added) = &self.added_required {
            if !added.matches(&node.name, node.labels()) {
                return Status::unresolvable(
                    "node(s) didn't match scheduler-enforced node affinity",
                );
            }
        }
        match state.read::<RequiredNodeAffinity>(FILTER_KEY) {
            Some(required) if !required.matches(node) => Status::unresolvable(REASON),
            _ => Status::success(),
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        let own = pod
            .spec()
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            });
        let mut terms = preferred(own);
        terms.extend(self.added_preferred.iter().cloned());
        if terms.is_empty() {
            return Status::skip();
        }
        state.write(SCORE_KEY, PreferredTerms(terms));
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(terms) = state.read::<PreferredTerms>(SCORE_KEY) else {
            return Ok(0);
        };
        Ok(terms
            .0
            .iter()
            .filter(|(t, _)| t.matches(&node.name, node.labels()))
            .map(|(_, w)| w)
            .sum())
    }

    fn normalize(&self, _: &CycleState, _: &PodInfo, _: &[Arc<NodeInfo>], scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::model::testing::{NodeBuilder, PodBuilder};
    use k8s_openapi::api::core::v1::{
        Affinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };

    fn plugin() -> NodeAffinity {
        NodeAffinity {
            added_required: None,
            added_preferred: Vec::new(),
        }
    }

    fn term(key: &str, operator: &str, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            match_fields: None,
        }
    }

    fn required(terms: Vec<NodeSelectorTerm>) -> Affinity {
        Affinity {
            node_affinity: Some(NodeAffinitySpec {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            ..Default::default()
        }
    }

    fn run_filter(pod: PodBuilder, node: NodeBuilder) -> Status {
        let pod = pod.info();
        let mut state = CycleState::new();
        let pre = plugin().pre_filter(&mut state, &pod, &Snapshot::default());
        if pre.is_skip() {
            return Status::success();
        }
        plugin().filter(&state, &pod, &node.info_with(&[]))
    }

    #[test]
    fn filter_table() {
        let zone_a = || NodeBuilder::new("n").label("zone", "a");
        let cases = [
            (
                "nothing required",
                PodBuilder::new("p"),
                zone_a(),
                Code::Success,
            ),
            (
                "nodeSelector matches",
                PodBuilder::new("p").node_selector("zone", "a"),
                zone_a(),
                Code::Success,
            ),
            (
                "nodeSelector differs",
                PodBuilder::new("p").node_selector("zone", "b"),
                zone_a(),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "required In",
                PodBuilder::new("p").affinity(required(vec![term("zone", "In", &["a", "c"])])),
                zone_a(),
                Code::Success,
            ),
            (
                "terms are ORed",
                PodBuilder::new("p").affinity(required(vec![
                    term("zone", "In", &["x"]),
                    term("zone", "Exists", &[]),
                ])),
                zone_a(),
                Code::Success,
            ),
            (
                "NotIn excludes",
                PodBuilder::new("p").affinity(required(vec![term("zone", "NotIn", &["a"])])),
                zone_a(),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "empty term list matches nothing",
                PodBuilder::new("p").affinity(required(vec![])),
                zone_a(),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "selector and affinity both needed",
                PodBuilder::new("p")
                    .node_selector("zone", "a")
                    .affinity(required(vec![term("disk", "Exists", &[])])),
                zone_a(),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, node, code) in cases {
            let status = run_filter(pod, node);
            assert_eq!(status.code, code, "{name}");
            if code != Code::Success {
                assert_eq!(status.message(), REASON, "{name}");
            }
        }
    }

    #[test]
    fn preferred_terms_score_by_weight() {
        let affinity = Affinity {
            node_affinity: Some(NodeAffinitySpec {
                required_during_scheduling_ignored_during_execution: None,
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    PreferredSchedulingTerm {
                        weight: 2,
                        preference: term("zone", "In", &["a"]),
                    },
                    PreferredSchedulingTerm {
                        weight: 8,
                        preference: term("disk", "In", &["ssd"]),
                    },
                ]),
            }),
            ..Default::default()
        };
        let pod = PodBuilder::new("p").affinity(affinity).info();
        let nodes: Vec<Arc<NodeInfo>> = [
            NodeBuilder::new("none"),
            NodeBuilder::new("zone").label("zone", "a"),
            NodeBuilder::new("both")
                .label("zone", "a")
                .label("disk", "ssd"),
        ]
        .into_iter()
        .map(|b| Arc::new(b.info_with(&[])))
        .collect();
        let mut state = CycleState::new();
        assert!(plugin()
            .pre_score(&mut state, &pod, &nodes, &Snapshot::default())
            .is_success());
        let mut scores: Vec<i64> = nodes
            .iter()
            .map(|n| plugin().score(&state, &pod, n).unwrap())
            .collect();
        assert_eq!(scores, vec![0, 2, 10]);
        plugin().normalize(&state, &pod, &nodes, &mut scores);
        assert_eq!(scores, vec![0, 20, 100]);
    }
}
