//! How many replicas a resource metric asks for, kube's replica
//! calculator: the pods' usage against their requests (Utilization) or
//! against a per-pod value (AverageValue), within a tolerance of the
//! target nothing changes, and the pods the metrics cannot speak for are
//! counted so that they never push the count the wrong way: a pod
//! without metrics counts as at its target when scaling down and as idle
//! when scaling up; an unready pod (or one still starting, for CPU)
//! counts as idle when scaling up and is left out otherwise.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{self, DateTime, Utc};

use super::metrics_client::PodMetrics;
use super::milli::milli_value;

/// Why no count could be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalculationError {
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoReadyMetrics,
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        resource: String,
        container: String,
        pod: String,
    },
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
}

/// A metric's proposal: the count, and what was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    pub replicas: i32,
    /// Usage as a percentage of requests (Utilization targets).
    pub utilization: Option<i32>,
    /// The average usage per pod, in thousandths of the resource's unit.
    pub average_milli: i64,
}

/// The calculator's settings (kube-controller-manager's flags).
#[derive(Debug, Clone, Copy)]
pub struct Calculator {
    /// `--horizontal-pod-autoscaler-tolerance`.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
}

/// The pods sorted by how their metrics may be used.
#[derive(Debug, Default)]
struct Grouping {
    ready: usize,
    unready: HashSet<String>,
    missing: HashSet<String>,
    ignored: HashSet<String>,
}

/// What the metric is measured against: each pod's request, or one
/// value per pod.
enum Target<'a> {
    Utilization {
        percent: i32,
        requests: &'a HashMap<String, i64>,
    },
    AverageValue(i64),
}

impl Target<'_> {
    /// (usage ratio, utilization percent, average usage) of `metrics`.
    fn ratio(
        &self,
        metrics: &HashMap<String, i64>,
    ) -> Result<(f64, Option<i32>, i64), CalculationError> {
        match self {
            Target::Utilization { percent, requests } => {
                let (mut usage, mut requested, mut counted) = (0i64, 0i64, 0i64);
                for (pod, value) in metrics {
                    if let Some(request) = requests.get(pod) {
                        usage += value;
                        requested += request;
                        counted += 1;
                    }
                }
                if requested == 0 {
                    return Err(CalculationError::NoMatchingMetrics);
                }
                let utilization = (usage * 100 / requested) as i32;
                let ratio = f64::from(utilization) / f64::from(*percent);
                Ok((ratio, Some(utilization), usage / counted))
            }
            Target::AverageValue(target) => {
                let total: i64 = metrics.values().sum();
                let average = total / (metrics.len().max(1) as i64);
                Ok((average as f64 / *target as f64, None, average))
            }
        }
    }

    /// The value a pod without metrics is taken to use when scaling down.
    fn at_target(&self, pod: &str) -> i64 {
        match self {
            Target::Utilization { requests, .. } => requests.get(pod).copied().unwrap_or(0),
            Target::AverageValue(target) => *target,
        }
    }
}

impl Calculator {
    fn within_tolerance(&self, ratio: f64) -> bool {
        (1.0 - ratio).abs() <= self.tolerance
    }

    /// Replicas for a Utilization target of `percent` of the pods' requests
    /// for `resource` (of `container` alone, if given).
    pub fn utilization_replicas(
        &self,
        current: i32,
        percent: i32,
        metrics: &PodMetrics,
        pods: &[Pod],
        (resource, container): (&str, Option<&str>),
        now: DateTime<Utc>,
    ) -> Result<Proposal, CalculationError> {
        if pods.is_empty() {
            return Err(CalculationError::NoPods);
        }
        let requests = pod_requests(pods, resource, container)?;
        let target = Target::Utilization {
            percent,
            requests: &requests,
        };
        self.replicas(current, &target, metrics, pods, resource, now)
    }

    /// Replicas for an AverageValue target (thousandths of the unit per pod).
    pub fn average_value_replicas(
        &self,
        current: i32,
        target_milli: i64,
        metrics: &PodMetrics,
        pods: &[Pod],
        resource: &str,
        now: DateTime<Utc>,
    ) -> Result<Proposal, CalculationError> {
        if pods.is_empty() {
            return Err(CalculationError::NoPods);
        }
        let target = Target::AverageValue(target_milli.max(1));
        self.replicas(current, &target, metrics, pods, resource, now)
    }

    fn replicas(
        &self,
        current: i32,
        target: &Target,
        metrics: &PodMetrics,
        pods: &[Pod],
        resource: &str,
        now: DateTime<Utc>,
    ) -> Result<Proposal, CalculationError> {
        let groups = self.group_pods(pods, metrics, resource, now);
        let mut usable: HashMap<String, i64> = metrics
            .usage
            .iter()
            .filter(|(pod, _)| !groups.ignored.contains(*pod) && !groups.unready.contains(*pod))
            .map(|(pod, value)| (pod.clone(), *value))
            .collect();
        if usable.is_empty() {
            return Err(CalculationError::NoReadyMetrics);
        }
        let (ratio, utilization, average_milli) = target.ratio(&usable)?;
        let measured = |replicas| Proposal {
            replicas,
            utilization,
            average_milli,
        };
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if self.within_tolerance(ratio) {
                return Ok(measured(current));
            }
            return Ok(measured(ceil(ratio * groups.ready as f64)));
        }
        // Count what the metrics cannot speak for so that it damps the
        // change instead of driving it.
        for pod in &groups.missing {
            let assumed = if ratio < 1.0 {
                target.at_target(pod)
            } else {
                0
            };
            usable.insert(pod.clone(), assumed);
        }
        if scale_up_with_unready {
            for pod in &groups.unready {
                usable.insert(pod.clone(), 0);
            }
        }
        let (new_ratio, _, _) = target.ratio(&usable)?;
        let direction_flipped =
            (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
        if self.within_tolerance(new_ratio) || direction_flipped {
            return Ok(measured(current));
        }
        let replicas = ceil(new_ratio * usable.len() as f64);
        if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
            return Ok(measured(current));
        }
        Ok(measured(replicas))
    }

    /// kube's groupPods: deleted and finished pods are ignored, pending
    /// ones unready; for CPU a pod counts as unready while it has never
    /// been ready, and during its initialization period until its
    /// metrics were taken a whole window after it became ready.
    fn group_pods(
        &self,
        pods: &[Pod],
        metrics: &PodMetrics,
        resource: &str,
        now: DateTime<Utc>,
    ) -> Grouping {
        let mut groups = Grouping::default();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let status = pod.status.clone().unwrap_or_default();
            let phase = status.phase.as_deref().unwrap_or("");
            if pod.metadata.deletion_timestamp.is_some()
                || phase == "Failed"
                || phase == "Succeeded"
            {
                groups.ignored.insert(name);
                continue;
            }
            if phase == "Pending" {
                groups.unready.insert(name);
                continue;
            }
            if !metrics.usage.contains_key(&name) {
                groups.missing.insert(name);
                continue;
            }
            if resource == "cpu" && self.cpu_unready(pod, metrics, now) {
                groups.unready.insert(name);
                continue;
            }
            groups.ready += 1;
        }
        groups
    }

    fn cpu_unready(&self, pod: &Pod, metrics: &PodMetrics, now: DateTime<Utc>) -> bool {
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
        let (Some(ready), Some(started)) = (ready, status.and_then(|s| s.start_time.as_ref()))
        else {
            return true;
        };
        let transition = ready
            .last_transition_time
            .as_ref()
            .map_or(started.0, |t| t.0);
        let is_false = ready.status == "False";
        if started.0 + span(self.cpu_initialization_period) > now {
            let measured_too_early = metrics.timestamp < transition + metrics.window;
            return is_false || measured_too_early;
        }
        is_false && started.0 + span(self.initial_readiness_delay) > transition
    }
}

fn span(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

/// kube's rounding of a proposal: up, to whole replicas.
fn ceil(value: f64) -> i32 {
    value.ceil().clamp(0.0, f64::from(i32::MAX)) as i32
}

/// Each pod's request for `resource` (its containers', or `container`'s),
/// in thousandths of the unit; a container without one is an error.
fn pod_requests(
    pods: &[Pod],
    resource: &str,
    container: Option<&str>,
) -> Result<HashMap<String, i64>, CalculationError> {
    let mut requests = HashMap::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut total = 0;
        let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
        for c in containers.filter(|c| container.is_none_or(|only| c.name == only)) {
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| milli_value(&q.0));
            match request {
                Some(value) => total += value,
                None => {
                    return Err(CalculationError::MissingRequest {
                        resource: resource.into(),
                        container: c.name.clone(),
                        pod: name,
                    })
                }
            }
        }
        requests.insert(name, total);
    }
    Ok(requests)
}
