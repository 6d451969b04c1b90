//! The autoscaler's status as kube writes it: the three conditions
//! (AbleToScale, ScalingActive, ScalingLimited), whose transition time
//! moves only when their status does, and the counts and metrics of
//! the last sync.

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus,
    MetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;

pub const ABLE_TO_SCALE: &str = "AbleToScale";
pub const SCALING_ACTIVE: &str = "ScalingActive";
pub const SCALING_LIMITED: &str = "ScalingLimited";

fn status_mut(hpa: &mut HorizontalPodAutoscaler) -> &mut HorizontalPodAutoscalerStatus {
    hpa.status.get_or_insert_with(Default::default)
}

/// Sets condition `kind`; its transition time changes with its status.
pub fn set(
    hpa: &mut HorizontalPodAutoscaler,
    kind: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
) {
    let status = if status { "True" } else { "False" };
    let conditions = status_mut(hpa).conditions.get_or_insert_with(Vec::new);
    let index = match conditions.iter().position(|c| c.type_ == kind) {
        Some(index) => index,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: kind.into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    if condition.status != status || condition.last_transition_time.is_none() {
        condition.last_transition_time = Some(Time(Utc::now()));
    }
    condition.status = status.into();
    condition.reason = Some(reason.into());
    condition.message = Some(message.into());
}

/// The counts and metrics of this sync; `rescaled` stamps lastScaleTime.
pub fn set_counts(
    hpa: &mut HorizontalPodAutoscaler,
    current: i32,
    desired: i32,
    metrics: Vec<MetricStatus>,
    rescaled: bool,
) {
    let generation = hpa.metadata.generation;
    let status = status_mut(hpa);
    status.current_replicas = Some(current);
    status.desired_replicas = desired;
    status.current_metrics = (!metrics.is_empty()).then_some(metrics);
    status.observed_generation = generation;
    if rescaled {
        status.last_scale_time = Some(Time(Utc::now()));
    }
}

/// The condition `kind`, if set.
#[cfg(test)]
pub fn get<'a>(
    hpa: &'a HorizontalPodAutoscaler,
    kind: &str,
) -> Option<&'a HorizontalPodAutoscalerCondition> {
    hpa.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_with_the_status_only() {
        let mut hpa = HorizontalPodAutoscaler::default();
        set(&mut hpa, SCALING_ACTIVE, true, "ValidMetricFound", "a");
        let first = get(&hpa, SCALING_ACTIVE)
            .unwrap()
            .last_transition_time
            .clone();
        set(&mut hpa, SCALING_ACTIVE, true, "ValidMetricFound", "b");
        let same = get(&hpa, SCALING_ACTIVE).unwrap();
        assert_eq!(same.last_transition_time, first);
        assert_eq!(same.message.as_deref(), Some("b"));
        std::thread::sleep(std::time::Duration::from_millis(2));
        set(
            &mut hpa,
            SCALING_ACTIVE,
            false,
            "FailedGetResourceMetric",
            "c",
        );
        let moved = get(&hpa, SCALING_ACTIVE).unwrap();
        assert_ne!(moved.last_transition_time, first);
        assert_eq!(hpa.status.unwrap().conditions.unwrap().len(), 1);
    }
}
