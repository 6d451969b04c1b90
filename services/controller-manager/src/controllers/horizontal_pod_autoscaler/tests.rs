//! kube's replica-calculator and normalization cases: tolerance,
//! missing metrics and unready pods damping a change, pods left out,
//! AverageValue targets, and the behaviour's windows and policies.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{self, Utc};
use serde_json::json;

use super::behavior::{rules, Counts, History};
use super::metrics_client::PodMetrics;
use super::replicas::{CalculationError, Calculator, Proposal};

const CALC: Calculator = Calculator {
    tolerance: 0.1,
    cpu_initialization_period: Duration::from_secs(300),
    initial_readiness_delay: Duration::from_secs(30),
};

fn ago(seconds: i64) -> String {
    (Utc::now() - chrono::Duration::seconds(seconds)).to_rfc3339()
}

/// A pod running for an hour, Ready since then, requesting `cpu` millicores.
fn pod(name: &str, phase: &str, cpu: i64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "x",
            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": "100Mi"}}}]},
        "status": {"phase": phase, "startTime": ago(3600),
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ago(3600)}]},
    }))
    .unwrap()
}

fn pods(names: &[&str]) -> Vec<Pod> {
    names.iter().map(|n| pod(n, "Running", 1000)).collect()
}

fn usage(values: &[(&str, i64)]) -> PodMetrics {
    PodMetrics {
        usage: values
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect::<HashMap<_, _>>(),
        timestamp: Utc::now(),
        window: chrono::Duration::seconds(30),
    }
}

fn cpu(
    current: i32,
    percent: i32,
    metrics: &PodMetrics,
    pods: &[Pod],
) -> Result<Proposal, CalculationError> {
    CALC.utilization_replicas(current, percent, metrics, pods, ("cpu", None), Utc::now())
}

#[test]
fn scales_up_to_the_ratio_of_usage_to_target() {
    let p = pods(&["a", "b", "c"]);
    let m = usage(&[("a", 300), ("b", 500), ("c", 700)]);
    let got = cpu(3, 30, &m, &p).unwrap();
    assert_eq!(
        (got.replicas, got.utilization, got.average_milli),
        (5, Some(50), 500)
    );
}

#[test]
fn scales_down_rounding_up() {
    let p = pods(&["a", "b", "c", "d", "e"]);
    let m = usage(&[("a", 100), ("b", 300), ("c", 500), ("d", 250), ("e", 250)]);
    assert_eq!(cpu(5, 50, &m, &p).unwrap().replicas, 3);
}

#[test]
fn within_tolerance_nothing_changes() {
    let p = pods(&["a", "b", "c"]);
    let m = usage(&[("a", 1050), ("b", 1050), ("c", 1050)]);
    assert_eq!(cpu(3, 100, &m, &p).unwrap().replicas, 3);
    // Just past the tolerance it scales.
    let m = usage(&[("a", 1110), ("b", 1110), ("c", 1110)]);
    assert_eq!(cpu(3, 100, &m, &p).unwrap().replicas, 4);
}

#[test]
fn missing_metrics_count_as_idle_when_scaling_up() {
    // Without the missing pod: 2 * 1.5 = 3 more; counted idle, the ratio
    // drops to 1.0 * ... and the rise is damped.
    let p = pods(&["a", "b", "c", "d"]);
    let m = usage(&[("a", 1500), ("b", 1500), ("c", 1500)]);
    let got = cpu(4, 100, &m, &p).unwrap();
    // (1500*3 + 0) / 4000 = 112% -> ceil(1.12 * 4) = 5.
    assert_eq!(got.replicas, 5);
    assert_eq!(
        got.utilization,
        Some(150),
        "the status reports what was measured"
    );
}

#[test]
fn missing_metrics_count_as_at_target_when_scaling_down() {
    let p = pods(&["a", "b", "c", "d"]);
    let m = usage(&[("a", 100), ("b", 100), ("c", 100)]);
    // Measured 10% of 50%: the missing pod counts as using its request
    // (100%), so (300 + 1000) / 4000 = 32% -> 0.65 * 4 = 2.6 -> 3.
    assert_eq!(cpu(4, 50, &m, &p).unwrap().replicas, 3);
}

#[test]
fn missing_metrics_never_flip_the_direction() {
    let p = pods(&["a", "b", "c"]);
    let m = usage(&[("a", 450), ("b", 450)]);
    // Measured 45% of 50% would scale down, a missing pod at 100% would
    // make it scale up: nothing changes.
    assert_eq!(cpu(3, 50, &m, &p).unwrap().replicas, 3);
}

#[test]
fn unready_pods_count_as_idle_on_scale_up_only() {
    let mut p = pods(&["a", "b"]);
    p.push(pod("c", "Pending", 1000));
    let m = usage(&[("a", 1000), ("b", 1000), ("c", 1000)]);
    // Ready pods at 100% of 50%: (2000 + 0) / 3000 = 66% -> 1.33 * 3 = 4.
    assert_eq!(cpu(3, 50, &m, &p).unwrap().replicas, 4);
    // Scaling down the unready pod is simply left out: 2 * 0.2 = 0.4 -> 1.
    let m = usage(&[("a", 100), ("b", 100), ("c", 1000)]);
    assert_eq!(cpu(3, 50, &m, &p).unwrap().replicas, 1);
}

#[test]
fn a_pod_ready_too_recently_for_a_full_window_is_unready_for_cpu() {
    let mut fresh = pod("c", "Running", 1000);
    let status = fresh.status.as_mut().unwrap();
    status.start_time = serde_json::from_value(json!(ago(20))).unwrap();
    status.conditions.as_mut().unwrap()[0].last_transition_time =
        serde_json::from_value(json!(ago(10))).unwrap();
    let mut p = pods(&["a", "b"]);
    p.push(fresh);
    let m = usage(&[("a", 1000), ("b", 1000), ("c", 1000)]);
    assert_eq!(cpu(3, 50, &m, &p).unwrap().replicas, 4);
    // Memory has no initialization period: all three count.
    let got = CALC
        .average_value_replicas(3, 500, &m, &p, "memory", Utc::now())
        .unwrap();
    assert_eq!(got.replicas, 6);
}

#[test]
fn deleted_and_finished_pods_are_ignored() {
    let mut p = pods(&["a", "b"]);
    let mut gone = pod("c", "Running", 1000);
    gone.metadata.deletion_timestamp = serde_json::from_value(json!(ago(1))).unwrap();
    p.push(gone);
    p.push(pod("d", "Failed", 1000));
    let m = usage(&[("a", 800), ("b", 800), ("c", 5000), ("d", 5000)]);
    assert_eq!(cpu(2, 40, &m, &p).unwrap().replicas, 4);
}

#[test]
fn refusals_name_what_is_missing() {
    let m = usage(&[("a", 100)]);
    assert_eq!(cpu(1, 50, &m, &[]).unwrap_err(), CalculationError::NoPods);
    let mut bare = pod("a", "Running", 1000);
    bare.spec.as_mut().unwrap().containers[0].resources = None;
    let err = cpu(1, 50, &m, &[bare]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "missing request for cpu in container app of Pod a"
    );
    let pending = vec![pod("a", "Pending", 1000)];
    let err = cpu(1, 50, &m, &pending).unwrap_err();
    assert_eq!(
        err.to_string(),
        "did not receive metrics for targeted pods (pods might be unready)"
    );
}

#[test]
fn average_value_targets_divide_the_mean_usage() {
    let p = pods(&["a", "b"]);
    let m = usage(&[("a", 300_000), ("b", 500_000)]);
    // 400 per pod against 200: twice as many.
    let got = CALC
        .average_value_replicas(2, 200_000, &m, &p, "memory", Utc::now())
        .unwrap();
    assert_eq!(
        (got.replicas, got.utilization, got.average_milli),
        (4, None, 400_000)
    );
}

fn counts(current: i32, desired: i32) -> Counts {
    Counts {
        min: 1,
        max: 100,
        current,
        desired,
    }
}

#[test]
fn without_a_behaviour_scale_up_is_at_most_double_or_four() {
    let mut history = History::default();
    let now = Instant::now();
    let got = history.normalize_plain(counts(3, 20), Duration::from_secs(300), now);
    assert_eq!(
        (got.replicas, got.limited, got.limit_reason),
        (6, true, "ScaleUpLimit")
    );
    let got = history.normalize_plain(counts(1, 20), Duration::from_secs(300), now);
    assert_eq!(got.replicas, 4);
    let got = history.normalize_plain(
        Counts {
            max: 5,
            ..counts(4, 20)
        },
        Duration::from_secs(300),
        now,
    );
    assert_eq!((got.replicas, got.limit_reason), (5, "TooManyReplicas"));
}

#[test]
fn without_a_behaviour_scale_down_waits_for_the_window() {
    let mut history = History::default();
    let window = Duration::from_secs(300);
    let t0 = Instant::now();
    history.normalize_plain(counts(5, 5), window, t0);
    let held = history.normalize_plain(counts(5, 2), window, t0 + Duration::from_secs(60));
    assert_eq!(
        (held.replicas, held.able_reason),
        (5, "ScaleDownStabilized")
    );
    let later = history.normalize_plain(counts(5, 2), window, t0 + Duration::from_secs(301));
    // The 5 has left the window; the 2 of a minute ago has not.
    assert_eq!((later.replicas, later.able_reason), (2, "ReadyForNewScale"));
    let floor = history.normalize_plain(
        Counts {
            min: 3,
            ..counts(5, 2)
        },
        window,
        t0 + Duration::from_secs(302),
    );
    assert_eq!(
        (floor.replicas, floor.limit_reason, floor.limited),
        (3, "TooFewReplicas", true)
    );
}

fn behavior(value: serde_json::Value) -> HorizontalPodAutoscalerBehavior {
    serde_json::from_value(value).unwrap()
}

#[test]
fn default_behaviour_adds_four_pods_or_doubles_whichever_is_more() {
    let b = behavior(json!({}));
    let (up, down) = rules(&b, Duration::from_secs(300));
    let mut history = History::default();
    let now = Instant::now();
    let got = history.normalize(counts(2, 50), (&up, &down), now);
    assert_eq!((got.replicas, got.limit_reason), (6, "ScaleUpLimit"));
    let got = history.normalize(counts(10, 50), (&up, &down), now);
    assert_eq!(got.replicas, 20);
}

#[test]
fn policies_count_the_changes_of_their_period() {
    let b = behavior(
        json!({"scaleUp": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}),
    );
    let (up, down) = rules(&b, Duration::from_secs(0));
    let mut history = History::default();
    let t0 = Instant::now();
    let first = history.normalize(counts(2, 10), (&up, &down), t0);
    assert_eq!(first.replicas, 4);
    history.record_scale(2, 4, (&up, &down), t0);
    // Within the minute the two pods already added use up the policy.
    let held = history.normalize(counts(4, 10), (&up, &down), t0 + Duration::from_secs(30));
    assert_eq!((held.replicas, held.limit_reason), (4, "ScaleUpLimit"));
    let next = history.normalize(counts(4, 10), (&up, &down), t0 + Duration::from_secs(61));
    assert_eq!(next.replicas, 6);
}

#[test]
fn select_policy_min_max_and_disabled() {
    let policies = json!([{"type": "Pods", "value": 1, "periodSeconds": 15},
                          {"type": "Percent", "value": 50, "periodSeconds": 15}]);
    let now = Instant::now();
    let down_to = |select: &str| {
        let b = behavior(json!({"scaleDown": {"stabilizationWindowSeconds": 0,
            "selectPolicy": select, "policies": policies}}));
        let (up, down) = rules(&b, Duration::from_secs(300));
        History::default()
            .normalize(counts(10, 1), (&up, &down), now)
            .replicas
    };
    // Max allows the larger change (50%: 5), Min the smaller (1 pod: 9).
    assert_eq!(down_to("Max"), 5);
    assert_eq!(down_to("Min"), 9);
    assert_eq!(down_to("Disabled"), 10);
}

#[test]
fn scale_up_window_takes_the_lowest_recent_recommendation() {
    let b = behavior(json!({"scaleUp": {"stabilizationWindowSeconds": 60}}));
    let (up, down) = rules(&b, Duration::from_secs(0));
    let mut history = History::default();
    let t0 = Instant::now();
    history.normalize(counts(3, 3), (&up, &down), t0);
    let held = history.normalize(counts(3, 8), (&up, &down), t0 + Duration::from_secs(10));
    assert_eq!((held.replicas, held.able_reason), (3, "ScaleUpStabilized"));
    let free = history.normalize(counts(3, 8), (&up, &down), t0 + Duration::from_secs(61));
    assert_eq!(
        free.replicas, 7,
        "the default rate: 4 pods or 100% per 15 s"
    );
}

#[test]
fn the_flag_sets_the_scale_down_window_a_behaviour_leaves_out() {
    let (_, down) = rules(
        &behavior(json!({"scaleDown": {"selectPolicy": "Min"}})),
        Duration::from_secs(42),
    );
    assert_eq!(down.window, Duration::from_secs(42));
    let (_, down) = rules(
        &behavior(json!({"scaleDown": {"stabilizationWindowSeconds": 7}})),
        Duration::from_secs(42),
    );
    assert_eq!(down.window, Duration::from_secs(7));
}
