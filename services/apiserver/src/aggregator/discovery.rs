//! Discovery of the available extension API servers: their groups in
//! kube's order (by the highest groupPriorityMinimum among a group's
//! APIServices, then by name; a group's versions by versionPriority,
//! then kube's version order), and their resource lists, as read from
//! the backends by the availability controller, in the aggregated
//! (apidiscovery.k8s.io/v2) form too.

use serde_json::{json, Value};

use super::registration::Registration;

/// One extension group: its name and versions, preferred first.
#[derive(Debug, PartialEq)]
pub struct Group {
    pub name: String,
    pub versions: Vec<String>,
    /// The highest groupPriorityMinimum of its APIServices.
    pub priority: i64,
}

/// `remote` (in order) placed among `local` (in order) as kube orders
/// groups: each before the first local group of a lower priority.
pub fn merge<T>(local: Vec<(i64, T)>, remote: Vec<(i64, T)>) -> Vec<T> {
    let mut merged: Vec<(i64, T)> = local;
    for (priority, item) in remote {
        let at = merged.iter().position(|(p, _)| *p < priority);
        merged.insert(at.unwrap_or(merged.len()), (priority, item));
    }
    merged.into_iter().map(|(_, item)| item).collect()
}

/// The groups of `available`, in kube's order.
pub fn groups(available: &[(Registration, Value)]) -> Vec<Group> {
    let mut names: Vec<(&str, i64)> = Vec::new();
    for (r, _) in available {
        match names.iter_mut().find(|(n, _)| *n == r.group) {
            Some((_, priority)) => *priority = (*priority).max(r.group_priority),
            None => names.push((&r.group, r.group_priority)),
        }
    }
    names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let versions_of = |group: &str| {
        let mut versions: Vec<&Registration> = available
            .iter()
            .map(|(r, _)| r)
            .filter(|r| r.group == group)
            .collect();
        versions.sort_by(|a, b| {
            let order = b.version_priority.cmp(&a.version_priority);
            order.then_with(|| kube_order(&a.version).cmp(&kube_order(&b.version)))
        });
        versions.into_iter().map(|r| r.version.clone()).collect()
    };
    names
        .into_iter()
        .map(|(name, priority)| Group {
            name: name.to_string(),
            versions: versions_of(name),
            priority,
        })
        .collect()
}

/// kube's order of API versions (`CompareKubeAwareVersionStrings`): GA
/// before beta before alpha, higher numbers first; versions of another
/// form last, alphabetically. Local discovery orders its versions so too.
pub fn kube_order(version: &str) -> (u8, i64, i64, String) {
    let other = (3, 0, 0, version.to_string());
    let Some(rest) = version.strip_prefix('v') else {
        return other;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let Ok(major) = rest[..digits].parse::<i64>() else {
        return other;
    };
    let tail = &rest[digits..];
    let level = |prefix: &str| {
        tail.strip_prefix(prefix)
            .and_then(|n| n.parse::<i64>().ok())
    };
    match (tail.is_empty(), level("beta"), level("alpha")) {
        (true, _, _) => (0, -major, 0, String::new()),
        (_, Some(minor), _) => (1, -major, -minor, String::new()),
        (_, _, Some(minor)) => (2, -major, -minor, String::new()),
        _ => other,
    }
}

/// An APIResourceList's resources as an aggregated discovery version:
/// subresources (`pods/status`) nested under their resource.
pub fn aggregated_version(group: &str, version: &str, document: &Value) -> Value {
    let listed = document["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kind = |r: &Value| {
        json!({"group": r["group"].as_str().unwrap_or(group),
               "version": r["version"].as_str().unwrap_or(version), "kind": r["kind"]})
    };
    let scope = |r: &Value| match r["namespaced"].as_bool() {
        Some(true) => "Namespaced",
        _ => "Cluster",
    };
    let mut resources: Vec<Value> = Vec::new();
    for r in listed.iter().filter(|r| !is_sub(r)) {
        let name = r["name"].as_str().unwrap_or("");
        let subresources: Vec<Value> = listed
            .iter()
            .filter_map(|s| {
                let (parent, sub) = s["name"].as_str()?.split_once('/')?;
                (parent == name).then(
                    || json!({"subresource": sub, "responseKind": kind(s), "verbs": s["verbs"]}),
                )
            })
            .collect();
        resources.push(json!({
            "resource": name, "responseKind": kind(r), "scope": scope(r),
            "singularResource": r["singularName"], "verbs": r["verbs"],
            "shortNames": r["shortNames"], "categories": r["categories"],
            "subresources": subresources,
        }));
    }
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

fn is_sub(resource: &Value) -> bool {
    resource["name"].as_str().is_some_and(|n| n.contains('/'))
}

/// The aggregated discovery items of the extension groups, with their
/// priorities.
pub fn aggregated_items(available: &[(Registration, Value)]) -> Vec<(i64, Value)> {
    groups(available)
        .into_iter()
        .map(|group| {
            let versions: Vec<Value> = group
                .versions
                .iter()
                .filter_map(|version| {
                    let (_, document) = available
                        .iter()
                        .find(|(r, _)| r.group == group.name && r.version == *version)?;
                    Some(aggregated_version(&group.name, version, document))
                })
                .collect();
            let item = json!({"metadata": {"name": group.name}, "versions": versions});
            (group.priority, item)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(
        group: &str,
        version: &str,
        group_priority: i64,
        version_priority: i64,
    ) -> Registration {
        Registration {
            name: format!("{version}.{group}"),
            group: group.into(),
            version: version.into(),
            group_priority,
            version_priority,
            service: None,
            ca_bundle: Vec::new(),
            insecure_skip_verify: false,
            available: true,
        }
    }

    #[test]
    fn groups_and_versions_are_ordered_by_priority_as_kube_orders_them() {
        let available = vec![
            (registration("b.example", "v1", 100, 10), json!({})),
            (
                registration("metrics.k8s.io", "v1beta1", 100, 100),
                json!({}),
            ),
            (
                registration("metrics.k8s.io", "v1alpha1", 100, 100),
                json!({}),
            ),
            (registration("metrics.k8s.io", "v1", 100, 50), json!({})),
            (registration("z.example", "v1", 2000, 10), json!({})),
        ];
        let groups = groups(&available);
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["z.example", "b.example", "metrics.k8s.io"]);
        assert_eq!(groups[2].versions, ["v1beta1", "v1alpha1", "v1"]);
    }

    #[test]
    fn versions_are_ordered_as_kube_orders_them() {
        let mut versions = vec![
            "v1alpha1", "v1", "foo", "v2beta1", "v2", "v1beta2", "v10", "v1beta1",
        ];
        versions.sort_by_key(|v| kube_order(v));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn extension_groups_go_before_the_first_local_group_of_lower_priority() {
        let local = vec![(18000, "core"), (17800, "apps"), (16700, "crds")];
        let remote = vec![(17000, "high.example"), (100, "metrics.k8s.io")];
        assert_eq!(
            merge(local, remote),
            ["core", "apps", "high.example", "crds", "metrics.k8s.io"]
        );
    }

    #[test]
    fn a_resource_list_becomes_an_aggregated_version_with_nested_subresources() {
        let document = json!({"kind": "APIResourceList", "groupVersion": "metrics.k8s.io/v1beta1",
            "resources": [
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
                {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get"]},
                {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]}]});
        let version = aggregated_version("metrics.k8s.io", "v1beta1", &document);
        let resources = version["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[0]["scope"], "Namespaced");
        assert_eq!(
            resources[0]["responseKind"],
            json!({"group": "metrics.k8s.io", "version": "v1beta1", "kind": "PodMetrics"})
        );
        assert_eq!(resources[0]["subresources"][0]["subresource"], "status");
        assert_eq!(resources[1]["scope"], "Cluster");
    }
}
