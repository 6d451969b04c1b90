//! Simulated resource usage, as metrics-server would measure it: each
//! running container uses its requests (or a little: 1m CPU, 8Mi memory),
//! unless the pod's annotations give the pod's usage, which is then
//! shared among its running containers; a node uses what its pods use
//! plus a constant for the system.

use k8s_openapi::api::core::v1::Pod;

use crate::pod::annotations::Plan;
use crate::pod::resources::container_requests;

const IDLE_CPU: i64 = 1;
const IDLE_MEMORY: i64 = 8 << 20;
/// What the node's own daemons use.
pub const SYSTEM_CPU: i64 = 100;
pub const SYSTEM_MEMORY: i64 = 512 << 20;

/// One container's usage: millicores and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    pub container: String,
    pub cpu: i64,
    pub memory: i64,
}

/// The usage of the pod's running containers; `None` if none runs.
pub fn pod_usage(pod: &Pod) -> Option<Vec<Usage>> {
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref()?;
    let running: Vec<&str> = status
        .container_statuses
        .iter()
        .flatten()
        .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        .map(|s| s.name.as_str())
        .collect();
    if running.is_empty() || status.phase.as_deref() != Some("Running") {
        return None;
    }
    let (plan, _) = Plan::parse(pod.metadata.annotations.as_ref());
    let share = |total: i64, index: usize| {
        let n = running.len() as i64;
        total / n + i64::from((index as i64) < total % n)
    };
    let usages = spec
        .containers
        .iter()
        .filter(|c| running.contains(&c.name.as_str()))
        .enumerate()
        .map(|(i, c)| {
            let requests = container_requests(c).unwrap_or_default();
            let own = |name: &str, idle: i64| {
                requests
                    .get(name)
                    .copied()
                    .filter(|v| *v > 0)
                    .unwrap_or(idle)
            };
            Usage {
                container: c.name.clone(),
                cpu: plan
                    .cpu_usage
                    .map_or_else(|| own("cpu", IDLE_CPU), |t| share(t, i)),
                memory: plan
                    .memory_usage
                    .map_or_else(|| own("memory", IDLE_MEMORY), |t| share(t, i)),
            }
        })
        .collect();
    Some(usages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn running_pod(annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": {"containers": [
                {"name": "a", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"name": "b", "image": "x"},
            ]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}},
            ]},
        }))
        .unwrap()
    }

    #[test]
    fn containers_use_their_requests_by_default() {
        let usage = pod_usage(&running_pod(json!({}))).unwrap();
        assert_eq!(
            usage[0],
            Usage {
                container: "a".into(),
                cpu: 250,
                memory: 64 << 20
            }
        );
        assert_eq!(
            usage[1],
            Usage {
                container: "b".into(),
                cpu: 1,
                memory: 8 << 20
            }
        );
    }

    #[test]
    fn the_annotation_sets_the_pods_usage() {
        let pod = running_pod(
            json!({"nodes.capstan.dev/cpu-usage": "1001m", "nodes.capstan.dev/memory-usage": "1Gi"}),
        );
        let usage = pod_usage(&pod).unwrap();
        assert_eq!(usage.iter().map(|u| u.cpu).sum::<i64>(), 1001);
        assert_eq!(usage[0].memory, 512 << 20);
    }

    #[test]
    fn a_pod_without_running_containers_has_no_usage() {
        let mut pod = running_pod(json!({}));
        pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(pod_usage(&pod), None);
    }
}
