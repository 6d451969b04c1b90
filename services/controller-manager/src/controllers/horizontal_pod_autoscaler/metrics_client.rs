//! Pods' resource usage from the resource metrics API
//! (`metrics.k8s.io/v1beta1` PodMetrics), reached as kube's HPA reaches
//! it: through the API server's aggregator, listing the pods the target's
//! selector picks. A pod whose containers do not all report the resource
//! is left out (the calculator then treats it as missing).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::chrono::{self, DateTime, Utc};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Deserialize;

use super::milli::milli_value;
use crate::config::parse_duration;

/// What metrics-server reports when it says nothing of its window.
const DEFAULT_WINDOW: Duration = Duration::from_secs(30);

/// Usage per pod, in thousandths of the resource's unit, and when it
/// was measured.
#[derive(Debug, Clone)]
pub struct PodMetrics {
    pub usage: HashMap<String, i64>,
    pub timestamp: DateTime<Utc>,
    pub window: chrono::Duration,
}

/// Why usage could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("unable to fetch metrics from resource metrics API: {0}")]
    Fetch(String),
    #[error("no metrics returned from resource metrics API")]
    Empty,
}

#[derive(Deserialize)]
struct ContainerMetrics {
    name: String,
    #[serde(default)]
    usage: HashMap<String, String>,
}

#[derive(Deserialize)]
struct Sample {
    timestamp: Option<String>,
    window: Option<String>,
    #[serde(default)]
    containers: Vec<ContainerMetrics>,
}

fn pod_metrics_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "PodMetrics".into(),
        plural: "pods".into(),
    }
}

/// Reads `resource`'s usage (of `container` alone, if given) of the pods
/// in `namespace` that `selector` picks.
pub async fn resource_usage(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
    (resource, container): (&str, Option<&str>),
) -> Result<PodMetrics, MetricsError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &pod_metrics_resource());
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| MetricsError::Fetch(e.to_string()))?;
    let samples = list.items.into_iter().filter_map(|item| {
        let name = item.metadata.name?;
        let sample: Sample = serde_json::from_value(item.data).ok()?;
        Some((name, sample))
    });
    summarize(samples, resource, container)
}

/// Sums each pod's containers; the first sample's time stands for all.
fn summarize(
    samples: impl Iterator<Item = (String, Sample)>,
    resource: &str,
    container: Option<&str>,
) -> Result<PodMetrics, MetricsError> {
    let mut usage = HashMap::new();
    let mut when: Option<(DateTime<Utc>, Duration)> = None;
    for (pod, sample) in samples {
        when.get_or_insert_with(|| {
            let window = sample.window.as_deref().and_then(parse_duration);
            (
                sample
                    .timestamp
                    .as_deref()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map_or_else(Utc::now, |t| t.with_timezone(&Utc)),
                window.unwrap_or(DEFAULT_WINDOW),
            )
        });
        let measured: Option<Vec<i64>> = sample
            .containers
            .iter()
            .filter(|c| container.is_none_or(|only| c.name == only))
            .map(|c| c.usage.get(resource).and_then(|q| milli_value(q)))
            .collect();
        match measured {
            Some(values) if !values.is_empty() => {
                usage.insert(pod, values.iter().sum());
            }
            _ => {}
        }
    }
    let Some((timestamp, window)) = when else {
        return Err(MetricsError::Empty);
    };
    Ok(PodMetrics {
        usage,
        timestamp,
        window: chrono::Duration::from_std(window).unwrap_or(chrono::Duration::seconds(30)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(value: serde_json::Value) -> Sample {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn containers_are_summed_and_incomplete_pods_left_out() {
        let samples = vec![
            (
                "a".to_string(),
                sample(
                    json!({"timestamp": "2024-01-01T00:00:00Z", "window": "30s", "containers": [
                    {"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
                    {"name": "side", "usage": {"cpu": "5000000n", "memory": "1Mi"}}]}),
                ),
            ),
            (
                "b".to_string(),
                sample(json!({"containers": [{"name": "app", "usage": {"memory": "1Mi"}}]})),
            ),
        ];
        let metrics = summarize(samples.into_iter(), "cpu", None).unwrap();
        assert_eq!(metrics.usage, HashMap::from([("a".to_string(), 255)]));
        assert_eq!(metrics.window, chrono::Duration::seconds(30));
        assert_eq!(metrics.timestamp.to_rfc3339(), "2024-01-01T00:00:00+00:00");
    }

    #[test]
    fn one_container_alone_and_no_samples() {
        let samples = vec![(
            "a".to_string(),
            sample(json!({"containers": [
                {"name": "app", "usage": {"cpu": "1"}}, {"name": "side", "usage": {"cpu": "2"}}]})),
        )];
        let metrics = summarize(samples.into_iter(), "cpu", Some("side")).unwrap();
        assert_eq!(metrics.usage["a"], 2000);
        let none = summarize(std::iter::empty(), "cpu", None).unwrap_err();
        assert_eq!(
            none.to_string(),
            "no metrics returned from resource metrics API"
        );
    }
}
