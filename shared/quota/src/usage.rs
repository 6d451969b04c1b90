//! What an object uses of a ResourceQuota's resources (kube's quota
//! evaluators): one of its kind for `count/<resource>[.<group>]` and the
//! legacy names (`pods`, `services`, ...), and for pods the compute
//! resources they request and are limited to. Shared by the
//! `ResourceQuota` plugin (what a create adds) and the controller that
//! keeps `status.used` current (what a namespace holds).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity;

/// Amounts by resource name (`pods`, `requests.cpu`), in base units.
pub type Usage = BTreeMap<String, f64>;

/// The core resources kube counts under their bare plural too.
const LEGACY_COUNTS: &[&str] = &[
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
];

/// The quota names under which one object of `group`/`resource` counts.
pub fn count_names(group: &str, resource: &str) -> Vec<String> {
    let mut names = vec![match group {
        "" => format!("count/{resource}"),
        group => format!("count/{resource}.{group}"),
    }];
    if group.is_empty() && LEGACY_COUNTS.contains(&resource) {
        names.push(resource.to_string());
    }
    names
}

/// A pod that has finished uses nothing (kube's evaluator skips it).
pub fn terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

/// What one object of `group`/`resource` uses, restricted to `tracked`.
pub fn of_object(group: &str, resource: &str, object: &Value, tracked: &[String]) -> Usage {
    let mut usage = Usage::new();
    if group.is_empty() && resource == "pods" && terminal(object) {
        return usage;
    }
    for name in count_names(group, resource) {
        usage.insert(name, 1.0);
    }
    if group.is_empty() && resource == "pods" {
        usage.extend(pod_compute(&object["spec"]));
    }
    usage.retain(|name, _| tracked.contains(name));
    usage
}

/// A pod's requests and limits as kube sums them: the containers'
/// together, or the largest init container's when that is more.
fn pod_compute(spec: &Value) -> Usage {
    let mut usage = Usage::new();
    for (kind, prefix) in [("requests", "requests."), ("limits", "limits.")] {
        for resource in ["cpu", "memory", "ephemeral-storage"] {
            let amount = |c: &Value| {
                let text = c["resources"][kind][resource].as_str();
                text.and_then(quantity::parse).unwrap_or(0.0)
            };
            let list = |field: &str| spec[field].as_array().cloned().unwrap_or_default();
            let sum: f64 = list("containers").iter().map(amount).sum();
            let init = list("initContainers")
                .iter()
                .map(amount)
                .fold(0.0, f64::max);
            let total = sum.max(init);
            if total > 0.0 {
                usage.insert(format!("{prefix}{resource}"), total);
                if kind == "requests" && resource != "ephemeral-storage" {
                    usage.insert(resource.to_string(), total);
                }
            }
        }
    }
    usage
}

/// The compute resources `tracked` names that every container of `spec`
/// must state for a quota to count them (kube: "must specify").
pub fn unspecified(spec: &Value, tracked: &[String]) -> Vec<String> {
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    let mut missing: Vec<String> = tracked
        .iter()
        .filter(|name| {
            let (kind, resource) = match name.split_once('.') {
                Some(("requests", r)) => ("requests", r),
                Some(("limits", r)) => ("limits", r),
                None if matches!(name.as_str(), "cpu" | "memory") => ("requests", name.as_str()),
                _ => return false,
            };
            containers
                .iter()
                .any(|c| c["resources"][kind][resource].is_null())
        })
        .cloned()
        .collect();
    missing.sort();
    missing
}

/// A quota map (`spec.hard`, `status.used`) as numbers.
pub fn parse(map: &Value) -> Usage {
    let entries = map.as_object().into_iter().flatten();
    entries
        .filter_map(|(k, v)| Some((k.clone(), quantity::parse(v.as_str()?)?)))
        .collect()
}

/// A number as a quantity: whole numbers plain (or in Ki/Mi/Gi when they
/// divide evenly, as memory usually does), fractions in milli-units.
pub fn format(amount: f64) -> String {
    if amount.fract() != 0.0 {
        return format!("{}m", (amount * 1000.0).round() as i64);
    }
    let whole = amount as i64;
    for (suffix, unit) in [("Gi", 1i64 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if whole != 0 && whole % unit == 0 {
            return format!("{}{suffix}", whole / unit);
        }
    }
    whole.to_string()
}

/// `a=1,b=2`, by name (kube's prettyPrint).
pub fn pretty(usage: &Usage) -> String {
    let pairs: Vec<String> = usage
        .iter()
        .map(|(k, v)| format!("{k}={}", format(*v)))
        .collect();
    pairs.join(",")
}

/// A usage as a quota map of quantity strings.
pub fn to_json(usage: &Usage) -> Value {
    let map = usage
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(format(*v))))
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_pod_counts_and_requests_what_its_containers_do() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}]}});
        let tracked = names(&[
            "pods",
            "count/pods",
            "requests.cpu",
            "requests.memory",
            "limits.cpu",
            "memory",
        ]);
        let usage = of_object("", "pods", &pod, &tracked);
        assert_eq!(
            pretty(&usage),
            "count/pods=1,limits.cpu=1,memory=128Mi,pods=1,requests.cpu=2,requests.memory=128Mi"
        );
        let done = json!({"spec": pod["spec"], "status": {"phase": "Succeeded"}});
        assert!(of_object("", "pods", &done, &tracked).is_empty());
        let deploy = of_object(
            "apps",
            "deployments",
            &json!({}),
            &names(&["count/deployments.apps"]),
        );
        assert_eq!(pretty(&deploy), "count/deployments.apps=1");
    }

    #[test]
    fn quantities_read_and_print_as_kube_writes_them() {
        assert_eq!(format(0.5), "500m");
        assert_eq!(format(3.0), "3");
        assert_eq!(format(512.0 * 1024.0 * 1024.0), "512Mi");
        assert_eq!(parse(&json!({"pods": "3", "cpu": "1500m"}))["cpu"], 1.5);
        let spec = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(
            unspecified(&spec, &names(&["requests.cpu", "limits.memory", "pods"])),
            ["limits.memory"]
        );
    }
}
