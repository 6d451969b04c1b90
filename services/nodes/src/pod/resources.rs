//! What a pod asks of its node: its effective requests as kube computes
//! them (`PodRequests`: containers and sidecars summed, each ordinary init
//! container's peak, plus overhead) and its QoS class (`GetPodQOS`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{self, Amounts, InvalidQuantity};

/// A container's requests; a resource with only a limit requests its
/// limit, as the API server defaults it.
pub fn container_requests(container: &Container) -> Result<Amounts, InvalidQuantity> {
    let Some(resources) = &container.resources else {
        return Ok(Amounts::new());
    };
    let mut requests = quantity::amounts(resources.limits.as_ref().unwrap_or(&BTreeMap::new()))?;
    requests.extend(quantity::amounts(
        resources.requests.as_ref().unwrap_or(&BTreeMap::new()),
    )?);
    Ok(requests)
}

fn add(total: &mut Amounts, more: &Amounts) {
    for (name, v) in more {
        *total.entry(name.clone()).or_default() += v;
    }
}

fn max_into(total: &mut Amounts, other: &Amounts) {
    for (name, v) in other {
        let entry = total.entry(name.clone()).or_default();
        *entry = (*entry).max(*v);
    }
}

/// A sidecar: an init container that keeps running (restartPolicy Always).
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The pod's effective requests, without the pod itself (`pods`).
pub fn pod_requests(spec: &PodSpec) -> Result<Amounts, InvalidQuantity> {
    let mut total = Amounts::new();
    for container in &spec.containers {
        add(&mut total, &container_requests(container)?);
    }
    // Sidecars run beside everything that starts after them; an ordinary
    // init container runs alone with the sidecars started before it.
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for container in spec.init_containers.iter().flatten() {
        let own = container_requests(container)?;
        if is_sidecar(container) {
            add(&mut sidecars, &own);
            add(&mut total, &own);
        } else {
            let mut running = sidecars.clone();
            add(&mut running, &own);
            max_into(&mut init_peak, &running);
        }
    }
    max_into(&mut total, &init_peak);
    if let Some(overhead) = &spec.overhead {
        add(&mut total, &quantity::amounts(overhead)?);
    }
    Ok(total)
}

/// The QoS class kube gives the pod: BestEffort, Burstable or Guaranteed.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = &pod.spec else {
        return "BestEffort";
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut any_set = false;
    let mut guaranteed = true;
    for container in containers {
        let empty = BTreeMap::new();
        let resources = container.resources.as_ref();
        let limits = resources.and_then(|r| r.limits.as_ref()).unwrap_or(&empty);
        let requests = resources
            .and_then(|r| r.requests.as_ref())
            .unwrap_or(&empty);
        let compute = |list: &BTreeMap<String, Quantity>| -> Vec<(String, Quantity)> {
            list.iter()
                .filter(|(name, q)| is_compute(name) && !is_zero(name, q))
                .map(|(name, q)| (name.clone(), q.clone()))
                .collect()
        };
        let (limits, requests) = (compute(limits), compute(requests));
        any_set |= !limits.is_empty() || !requests.is_empty();
        let both_limited = ["cpu", "memory"]
            .iter()
            .all(|r| limits.iter().any(|(name, _)| name == r));
        let requests_match = requests.iter().all(|(name, q)| {
            limits
                .iter()
                .find(|(limit_name, _)| limit_name == name)
                .is_some_and(|(_, limit)| same(name, q, limit))
        });
        guaranteed &= both_limited && requests_match;
    }
    match (any_set, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn is_compute(name: &str) -> bool {
    name == "cpu" || name == "memory"
}

fn is_zero(name: &str, q: &Quantity) -> bool {
    quantity::amount(name, q).is_ok_and(|v| v == 0)
}

fn same(name: &str, a: &Quantity, b: &Quantity) -> bool {
    match (quantity::amount(name, a), quantity::amount(name, b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> serde_json::Value {
        let list = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect::<serde_json::Map<_, _>>()
        };
        json!({"requests": list(requests), "limits": list(limits)})
    }

    #[test]
    fn containers_add_and_init_containers_peak() {
        let p = pod(json!({
            "containers": [
                {"name": "a", "image": "x", "resources": resources(&[("cpu", "100m"), ("memory", "1Gi")], &[])},
                {"name": "b", "image": "x", "resources": resources(&[], &[("cpu", "200m")])},
            ],
            "initContainers": [
                {"name": "i", "image": "x", "resources": resources(&[("cpu", "1"), ("memory", "64Mi")], &[])},
            ],
            "overhead": {"cpu": "10m"},
        }));
        let total = pod_requests(p.spec.as_ref().unwrap()).unwrap();
        assert_eq!(total["cpu"], 1010);
        assert_eq!(total["memory"], 1 << 30);
    }

    #[test]
    fn sidecars_run_beside_the_main_containers() {
        let p = pod(json!({
            "containers": [{"name": "a", "image": "x", "resources": resources(&[("cpu", "100m")], &[])}],
            "initContainers": [
                {"name": "s", "image": "x", "restartPolicy": "Always", "resources": resources(&[("cpu", "50m")], &[])},
                {"name": "i", "image": "x", "resources": resources(&[("cpu", "100m")], &[])},
            ],
        }));
        let total = pod_requests(p.spec.as_ref().unwrap()).unwrap();
        assert_eq!(total["cpu"], 150);
    }

    #[test]
    fn qos_classes_follow_kube() {
        let with = |r: serde_json::Value| {
            pod(json!({"containers": [{"name": "a", "image": "x", "resources": r}]}))
        };
        assert_eq!(qos_class(&with(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&with(resources(&[("cpu", "1")], &[]))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&with(resources(&[], &[("cpu", "1"), ("memory", "1Gi")]))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&with(resources(
                &[("cpu", "1000m"), ("memory", "1Gi")],
                &[("cpu", "1"), ("memory", "1Gi")]
            ))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&with(resources(
                &[("cpu", "500m")],
                &[("cpu", "1"), ("memory", "1Gi")]
            ))),
            "Burstable"
        );
    }
}
