//! One proposal per metric of the spec, and the largest wins (kube's
//! computeReplicasForMetrics): each resource metric is read from the
//! metrics API and turned into a count by the calculator; a metric that
//! cannot be read is reported with kube's reason, and if every metric
//! failed (or some failed and the rest would scale down) no count is
//! proposed at all.

use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HorizontalPodAutoscaler, MetricSpec, MetricStatus, MetricTarget,
    MetricValueStatus, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::chrono::Utc;

use super::metrics_client::{resource_usage, MetricsError};
use super::milli::milli_value;
use super::replicas::{CalculationError, Calculator, Proposal};

/// A metric that produced no count: kube's reason and its error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricFailure {
    pub reason: &'static str,
    pub error: String,
}

/// What the spec's metrics propose together.
#[derive(Debug)]
pub struct Computed {
    /// The largest proposal and the metric it came from; None when the
    /// metrics cannot be acted on.
    pub proposal: Option<(i32, String)>,
    /// One status per metric, in the spec's order (empty where it failed).
    pub statuses: Vec<MetricStatus>,
    /// The first failure and how many metrics failed.
    pub failure: Option<(MetricFailure, usize)>,
}

impl Computed {
    /// kube's summary of the failures (the FailedComputeMetricsReplicas text).
    pub fn failure_summary(&self) -> Option<String> {
        let (first, count) = self.failure.as_ref()?;
        Some(format!(
            "invalid metrics ({count} invalid out of {}), first error is: {}",
            self.statuses.len(),
            first.error
        ))
    }
}

/// Where a resource metric is read.
pub struct Source<'a> {
    pub client: &'a kube::Client,
    pub calculator: &'a Calculator,
    pub namespace: &'a str,
    pub selector: &'a str,
    pub pods: &'a [Pod],
}

/// Every metric of `hpa` against `current` replicas.
pub async fn compute(source: &Source<'_>, hpa: &HorizontalPodAutoscaler, current: i32) -> Computed {
    let specs = hpa
        .spec
        .as_ref()
        .and_then(|s| s.metrics.clone())
        .unwrap_or_default();
    let spec_replicas = current;
    let mut statuses = vec![MetricStatus::default(); specs.len()];
    let mut best: Option<(i32, String)> = None;
    let mut failure: Option<(MetricFailure, usize)> = None;
    for (i, spec) in specs.iter().enumerate() {
        match one_metric(source, spec, current).await {
            Ok((replicas, name, status)) => {
                statuses[i] = status;
                if best.as_ref().is_none_or(|(b, _)| *b == 0 || replicas > *b) {
                    best = Some((replicas, name));
                }
            }
            Err(failed) => match &mut failure {
                Some((_, count)) => *count += 1,
                None => failure = Some((failed, 1)),
            },
        }
    }
    let failed = failure.as_ref().map_or(0, |(_, n)| *n);
    let scales_down = best.as_ref().is_some_and(|(r, _)| *r < spec_replicas);
    let proposal = if failed >= specs.len() || (failed > 0 && scales_down) {
        None
    } else {
        best
    };
    Computed {
        proposal,
        statuses,
        failure,
    }
}

/// kube's name of a resource metric, as the condition and events say it.
fn metric_name(resource: &str, container: Option<&str>, utilization: bool) -> String {
    let kind = if container.is_some() {
        "container resource"
    } else {
        "resource"
    };
    match utilization {
        true => format!("{resource} {kind} utilization (percentage of request)"),
        false => format!("{resource} {kind}"),
    }
}

async fn one_metric(
    source: &Source<'_>,
    spec: &MetricSpec,
    current: i32,
) -> Result<(i32, String, MetricStatus), MetricFailure> {
    let (resource, container, target, reason) = match spec.type_.as_str() {
        "Resource" => match &spec.resource {
            Some(r) => (r.name.as_str(), None, &r.target, "FailedGetResourceMetric"),
            None => return Err(invalid_source("resource")),
        },
        "ContainerResource" => match &spec.container_resource {
            Some(r) => (
                r.name.as_str(),
                Some(r.container.as_str()),
                &r.target,
                "FailedGetContainerResourceMetric",
            ),
            None => return Err(invalid_source("containerResource")),
        },
        kind @ ("Pods" | "Object" | "External") => return Err(unsupported(kind, spec)),
        other => {
            return Err(MetricFailure {
                reason: "InvalidMetricSourceType",
                error: format!("unknown metric source type {other:?}"),
            })
        }
    };
    let failed = |error: String| MetricFailure { reason, error };
    let (proposal, utilization) = resource_proposal(source, (resource, container), target, current)
        .await
        .map_err(&failed)?;
    let value = MetricValueStatus {
        average_utilization: proposal.utilization,
        average_value: Some(Quantity(format_milli(proposal.average_milli))),
        value: None,
    };
    let status = match container {
        None => MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: resource.into(),
                current: value,
            }),
            ..Default::default()
        },
        Some(container) => MetricStatus {
            type_: "ContainerResource".into(),
            container_resource: Some(ContainerResourceMetricStatus {
                name: resource.into(),
                container: container.into(),
                current: value,
            }),
            ..Default::default()
        },
    };
    Ok((
        proposal.replicas,
        metric_name(resource, container, utilization),
        status,
    ))
}

/// The proposal of one resource metric, and whether it is a Utilization one.
async fn resource_proposal(
    source: &Source<'_>,
    (resource, container): (&str, Option<&str>),
    target: &MetricTarget,
    current: i32,
) -> Result<(Proposal, bool), String> {
    let scope = if container.is_some() {
        format!("{resource} container")
    } else {
        resource.to_string()
    };
    if let Some(value) = &target.average_value {
        let milli =
            milli_value(&value.0).ok_or_else(|| format!("invalid target value {:?}", value.0))?;
        let proposal = read_and_calculate(source, (resource, container), |calc, metrics, now| {
            calc.average_value_replicas(current, milli, metrics, source.pods, resource, now)
        })
        .await
        .map_err(|e| format!("failed to get {scope} usage: {e}"))?;
        return Ok((proposal, false));
    }
    let Some(percent) = target.average_utilization else {
        return Err("invalid resource metric source: neither a utilization target nor a value target was set".into());
    };
    let proposal = read_and_calculate(source, (resource, container), |calc, metrics, now| {
        calc.utilization_replicas(
            current,
            percent,
            metrics,
            source.pods,
            (resource, container),
            now,
        )
    })
    .await
    .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
    Ok((proposal, true))
}

async fn read_and_calculate(
    source: &Source<'_>,
    which: (&str, Option<&str>),
    calculate: impl FnOnce(
        &Calculator,
        &super::metrics_client::PodMetrics,
        k8s_openapi::chrono::DateTime<Utc>,
    ) -> Result<Proposal, CalculationError>,
) -> Result<Proposal, String> {
    let metrics = resource_usage(source.client, source.namespace, source.selector, which)
        .await
        .map_err(|e: MetricsError| {
            format!("unable to get metrics for resource {}: {e}", which.0)
        })?;
    calculate(source.calculator, &metrics, Utc::now()).map_err(|e| e.to_string())
}

fn invalid_source(field: &str) -> MetricFailure {
    MetricFailure {
        reason: "InvalidMetricSourceType",
        error: format!("metric source {field} is not set"),
    }
}

/// Custom and external metrics need an adapter this control plane does
/// not have; said plainly, with the reason kube uses for each source.
fn unsupported(kind: &str, spec: &MetricSpec) -> MetricFailure {
    let name = match kind {
        "Pods" => spec.pods.as_ref().map(|p| p.metric.name.clone()),
        "Object" => spec.object.as_ref().map(|o| o.metric.name.clone()),
        _ => spec.external.as_ref().map(|e| e.metric.name.clone()),
    };
    let api = if kind == "External" {
        "external.metrics.k8s.io"
    } else {
        "custom.metrics.k8s.io"
    };
    MetricFailure {
        reason: match kind {
            "Pods" => "FailedGetPodsMetric",
            "Object" => "FailedGetObjectMetric",
            _ => "FailedGetExternalMetric",
        },
        error: format!(
            "unable to get metric {}: this controller does not read the {api} API",
            name.unwrap_or_default()
        ),
    }
}

/// A quantity of thousandths, as kube prints a milli quantity.
fn format_milli(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}
