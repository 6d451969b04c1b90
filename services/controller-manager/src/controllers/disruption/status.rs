//! A budget's status from its pods, kube's `buildDisruptedPodMap`,
//! `countHealthyPods` and `updatePdbStatus`: pods the eviction API
//! reported as about to go are not counted healthy for two minutes (then
//! forgotten, with an event if they never went), disruptions allowed are
//! the healthy pods over the desired (never below zero, and zero while no
//! pod is expected), and the DisruptionAllowed condition says which.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::chrono::{DateTime, Duration, Utc};

use super::expected::Expected;
use crate::pods;

/// How long a pod the eviction API let go may take to be deleted.
pub const DELETION_TIMEOUT: Duration = Duration::minutes(2);
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const SUFFICIENT_PODS: &str = "SufficientPods";
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
pub const SYNC_FAILED: &str = "SyncFailed";

/// The disrupted pods still awaited, when to look again, and the pods
/// whose deletion never came.
#[derive(Debug, Default)]
pub struct Disrupted {
    pub pods: BTreeMap<String, Time>,
    pub recheck_at: Option<DateTime<Utc>>,
    pub overdue: Vec<Arc<Pod>>,
}

pub fn disrupted(pdb: &PodDisruptionBudget, pods: &[Arc<Pod>], now: DateTime<Utc>) -> Disrupted {
    let mut result = Disrupted::default();
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
    let Some(recorded) = recorded.filter(|r| !r.is_empty()) else {
        return result;
    };
    for pod in pods {
        if pods::is_terminating(pod) {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let expected_deletion = at.0 + DELETION_TIMEOUT;
        if expected_deletion < now {
            result.overdue.push(pod.clone());
            continue;
        }
        if result.recheck_at.is_none_or(|r| expected_deletion < r) {
            result.recheck_at = Some(expected_deletion);
        }
        result.pods.insert(name, at.clone());
    }
    result
}

/// Ready pods that are neither being deleted nor about to be.
pub fn healthy(pods: &[Arc<Pod>], disrupted: &BTreeMap<String, Time>, now: DateTime<Utc>) -> i32 {
    let counted = pods.iter().filter(|pod| {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let going = disrupted
            .get(name)
            .is_some_and(|at| at.0 + DELETION_TIMEOUT > now);
        !pods::is_terminating(pod) && !going && pods::is_ready(pod)
    });
    counted.count() as i32
}

/// Sets the condition `kind` (kube's `SetStatusCondition`: the transition
/// time moves only when the status does).
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

/// DisruptionAllowed from the status's disruptionsAllowed.
pub fn update_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: DateTime<Utc>) {
    let allowed = status.disruptions_allowed > 0;
    let condition = Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: if allowed { "True" } else { "False" }.into(),
        reason: if allowed {
            SUFFICIENT_PODS
        } else {
            INSUFFICIENT_PODS
        }
        .into(),
        message: String::new(),
        observed_generation: status.observed_generation,
        last_transition_time: Time(now),
    };
    set_condition(status.conditions.get_or_insert_with(Vec::new), condition);
}

/// The status for `healthy` pods against what is `expected`.
pub fn calculate(
    pdb: &PodDisruptionBudget,
    healthy: i32,
    expected: &Expected,
    disrupted: BTreeMap<String, Time>,
    now: DateTime<Utc>,
) -> PodDisruptionBudgetStatus {
    let mut allowed = healthy - expected.desired_healthy;
    if expected.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = pdb.status.clone().unwrap_or_default();
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: expected.desired_healthy,
        expected_pods: expected.expected,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    update_allowed_condition(&mut status, now);
    status
}

/// The status a failed sync leaves: nothing may be disrupted.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    reason: &str,
    now: DateTime<Utc>,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let condition = Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: "False".into(),
        reason: SYNC_FAILED.into(),
        message: reason.to_string(),
        observed_generation: status.observed_generation,
        last_transition_time: Time(now),
    };
    set_condition(status.conditions.get_or_insert_with(Vec::new), condition);
    status
}

/// Whether writing `new` over the stored status changes anything.
pub fn differs(pdb: &PodDisruptionBudget, new: &PodDisruptionBudgetStatus) -> bool {
    let old = pdb.status.clone().unwrap_or_default();
    let empty_map = |m: &Option<BTreeMap<String, Time>>| m.clone().unwrap_or_default();
    old.current_healthy != new.current_healthy
        || old.desired_healthy != new.desired_healthy
        || old.expected_pods != new.expected_pods
        || old.disruptions_allowed != new.disruptions_allowed
        || empty_map(&old.disrupted_pods) != empty_map(&new.disrupted_pods)
        || old.observed_generation != new.observed_generation
        || old.conditions != new.conditions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::fixtures::pod;
    use crate::testkit::object;
    use serde_json::json;

    fn budget(disrupted: serde_json::Value) -> PodDisruptionBudget {
        object(
            json!({"metadata": {"name": "b", "namespace": "default", "generation": 3},
            "spec": {"minAvailable": 1}, "status": {"disruptedPods": disrupted,
            "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0, "disruptionsAllowed": 0}}),
        )
    }

    #[test]
    fn pods_about_to_be_evicted_are_not_healthy_until_they_are_overdue() {
        let now = Utc::now();
        let ready = Some(now - Duration::minutes(10));
        let pods = [
            Arc::new(pod("a", "Running", ready)),
            Arc::new(pod("b", "Running", ready)),
            Arc::new(pod("c", "Running", ready)),
        ];
        let recent = (now - Duration::seconds(30)).to_rfc3339();
        let old = (now - Duration::minutes(5)).to_rfc3339();
        let pdb = budget(json!({"a": recent, "b": old}));
        let found = disrupted(&pdb, &pods, now);
        assert_eq!(found.pods.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(found.overdue.len(), 1);
        assert!(found.recheck_at.unwrap() > now);
        assert_eq!(healthy(&pods, &found.pods, now), 2);
    }

    #[test]
    fn allowed_disruptions_and_the_condition() {
        let now = Utc::now();
        let pdb = budget(json!({}));
        let expected = Expected {
            expected: 3,
            desired_healthy: 2,
            unmanaged: vec![],
        };
        let status = calculate(&pdb, 3, &expected, BTreeMap::new(), now);
        assert_eq!(status.disruptions_allowed, 1);
        assert_eq!(status.observed_generation, Some(3));
        let condition = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", SUFFICIENT_PODS)
        );
        let short = calculate(&pdb, 1, &expected, BTreeMap::new(), now);
        assert_eq!(short.disruptions_allowed, 0);
        assert_eq!(
            short.conditions.as_ref().unwrap()[0].reason,
            INSUFFICIENT_PODS
        );
        let none_expected = Expected {
            expected: 0,
            desired_healthy: 0,
            unmanaged: vec![],
        };
        assert_eq!(
            calculate(&pdb, 2, &none_expected, BTreeMap::new(), now).disruptions_allowed,
            0
        );
        let failed = fail_safe(&pdb, "boom", now);
        assert_eq!(failed.conditions.as_ref().unwrap()[0].reason, SYNC_FAILED);
        assert_eq!(failed.conditions.as_ref().unwrap()[0].message, "boom");
    }
}
