//! NodeResourcesFit: the node must have room for the pod's requests (cpu,
//! memory, ephemeral storage, extended resources, and a pod slot); its score
//! follows the profile's strategy (LeastAllocated by default).

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;

use super::allocation::{
    checked_resources, pod_requests, requested_and_allocatable, Counting, ResourceSpec,
};
use super::strategy::{ScoringStrategy, StrategyArgs};
use crate::framework::{
    ArgsError, ClusterEvent, CycleState, FilterPlugin, Plugin, PluginContext, PreScorePlugin,
    ScorePlugin, Snapshot, Status,
};
use crate::model::resource::is_extended_resource_name;
use crate::model::{NodeInfo, PodInfo};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FitArgs {
    ignored_resources: Option<Vec<String>>,
    ignored_resource_groups: Option<Vec<String>>,
    scoring_strategy: Option<StrategyArgs>,
}

pub struct NodeResourcesFit {
    ignored_resources: Vec<String>,
    ignored_groups: Vec<String>,
    resources: Vec<ResourceSpec>,
    strategy: ScoringStrategy,
}

const SCORE_KEY: &str = "PreScoreNodeResourcesFit";

#[derive(Clone)]
struct PodScoreRequests(Vec<i64>);

/// One resource the node lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    pub resource: String,
    pub reason: Cow<'static, str>,
}

impl NodeResourcesFit {
    pub const NAME: &'static str = "NodeResourcesFit";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: FitArgs = ArgsError::decode(context.args)?;
        let strategy_args = args.scoring_strategy.unwrap_or_default();
        let resources =
            checked_resources(strategy_args.resources.clone(), "scoringStrategy.resources")?;
        let strategy = ScoringStrategy::from_args(&strategy_args)?;
        Ok(Arc::new(NodeResourcesFit {
            ignored_resources: args.ignored_resources.unwrap_or_default(),
            ignored_groups: args.ignored_resource_groups.unwrap_or_default(),
            resources,
            strategy,
        }))
    }

    fn ignores(&self, name: &str) -> bool {
        if !is_extended_resource_name(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or_default();
        self.ignored_resources.iter().any(|r| r == name)
            || self.ignored_groups.iter().any(|g| g == group)
    }

    /// kube's `fitsRequest`: every resource the pod would overflow on `node`.
    pub fn insufficient(&self, pod: &PodInfo, node: &NodeInfo) -> Vec<Insufficient> {
        let mut lacking = Vec::new();
        let mut lack = |resource: &str, reason: Cow<'static, str>| {
            lacking.push(Insufficient {
                resource: resource.to_string(),
                reason,
            });
        };
        if node.pods.len() as i64 + 1 > node.allowed_pod_number() {
            lack("pods", "Too many pods".into());
        }
        let want = &pod.requests;
        if want.is_zero() {
            return lacking;
        }
        let (have, used) = (&node.allocatable, &node.requested);
        if have.milli_cpu < want.milli_cpu + used.milli_cpu {
            lack("cpu", "Insufficient cpu".into());
        }
        if have.memory < want.memory + used.memory {
            lack("memory", "Insufficient memory".into());
        }
        if have.ephemeral_storage < want.ephemeral_storage + used.ephemeral_storage {
            lack("ephemeral-storage", "Insufficient ephemeral-storage".into());
        }
        for (name, amount) in &want.scalar {
            if *amount == 0 || self.ignores(name) {
                continue;
            }
            if have.get(name) < amount + used.get(name) {
                lack(name, format!("Insufficient {name}").into());
            }
        }
        lacking
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        super::allocation::resource_events()
    }
    crate::serves!(filter, pre_score, score);
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let lacking = self.insufficient(pod, node);
        if lacking.is_empty() {
            return Status::success();
        }
        let mut status = Status::unschedulable("");
        status.reasons = lacking.into_iter().map(|l| l.reason).collect();
        status
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        state.write(
            SCORE_KEY,
            PodScoreRequests(pod_requests(pod, &self.resources, Counting::NonZero)),
        );
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let computed;
        let requests = match state.read::<PodScoreRequests>(SCORE_KEY) {
            Some(r) => &r.0,
            None => {
                computed = pod_requests(pod, &self.resources, Counting::NonZero);
                &computed
            }
        };
        let (requested, allocatable) =
            requested_and_allocatable(node, &self.resources, requests, Counting::NonZero);
        Ok(self
            .strategy
            .score(&self.resources, &requested, &allocatable))
    }
}

#[cfg(test)]
mod tests;
