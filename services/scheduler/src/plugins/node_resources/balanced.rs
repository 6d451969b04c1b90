//! NodeResourcesBalancedAllocation: prefers nodes whose resources would be
//! used in equal fractions (1 minus the standard deviation of the fractions).

use std::sync::Arc;

use serde::Deserialize;

use super::allocation::{
    checked_resources, pod_requests, requested_and_allocatable, Counting, ResourceSpec,
};
use crate::framework::{
    ArgsError, ClusterEvent, CycleState, Plugin, PluginContext, PreScorePlugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use crate::model::{NodeInfo, PodInfo};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BalancedArgs {
    resources: Option<Vec<ResourceSpec>>,
}

pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
}

const STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

#[derive(Clone)]
struct PodRequests(Vec<i64>);

impl BalancedAllocation {
    pub const NAME: &'static str = "NodeResourcesBalancedAllocation";

    pub fn factory(context: &PluginContext) -> Result<Arc<dyn Plugin>, ArgsError> {
        let args: BalancedArgs = ArgsError::decode(context.args)?;
        Ok(Arc::new(BalancedAllocation {
            resources: checked_resources(args.resources, "resources")?,
        }))
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        super::allocation::resource_events()
    }
    crate::serves!(pre_score, score);
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
        _: &Snapshot,
    ) -> Status {
        let requests = pod_requests(pod, &self.resources, Counting::Requested);
        if requests.iter().all(|r| *r == 0) {
            // A best-effort pod changes no node's balance.
            return Status::skip();
        }
        state.write(STATE_KEY, PodRequests(requests));
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let requests = match state.read::<PodRequests>(STATE_KEY) {
            Some(r) => r.0.clone(),
            None => pod_requests(pod, &self.resources, Counting::Requested),
        };
        let (requested, allocatable) =
            requested_and_allocatable(node, &self.resources, &requests, Counting::Requested);
        Ok(balanced_score(&requested, &allocatable))
    }
}

/// `(1 - std(fractions)) * 100`, each fraction capped at 1.
pub fn balanced_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let fractions: Vec<f64> = requested
        .iter()
        .zip(allocatable)
        .filter(|(_, a)| **a != 0)
        .map(|(r, a)| (*r as f64 / *a as f64).min(1.0))
        .collect();
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            (fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64)
                .sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn balanced_score_table() {
        let cases: [(&[i64], &[i64], i64); 4] = [
            (&[3000, 5000], &[10000, 20000], 97),
            (&[3000, 5000], &[6000, 10000], 100),
            (&[0, 10000], &[10000, 10000], 50),
            (&[20000, 0], &[10000, 10000], 50),
        ];
        for (requested, allocatable, want) in cases {
            assert_eq!(
                balanced_score(requested, allocatable),
                want,
                "{requested:?} of {allocatable:?}"
            );
        }
    }

    #[test]
    fn best_effort_pods_skip_and_requests_count_as_given() {
        let plugin = BalancedAllocation {
            resources: super::super::allocation::default_resources(),
        };
        let mut state = CycleState::new();
        assert!(plugin
            .pre_score(
                &mut state,
                &PodBuilder::new("p").info(),
                &[],
                &Snapshot::default()
            )
            .is_skip());
        let pod = PodBuilder::new("p").req("1", "2Gi").info();
        assert!(plugin
            .pre_score(&mut state, &pod, &[], &Snapshot::default())
            .is_success());
        let node = NodeBuilder::new("n")
            .capacity("4", "8Gi", 110)
            .info_with(&[]);
        // cpu 1/4 = 0.25, memory 2/8 = 0.25: perfectly balanced.
        assert_eq!(plugin.score(&state, &pod, &node).unwrap(), 100);
    }
}
