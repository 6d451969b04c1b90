//! kube's `RequiredNodeAffinity`: a pod's `nodeSelector` and its required
//! node affinity against a node's name and labels.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};

/// Whether the node `name` with `labels` satisfies both the pod's
/// `nodeSelector` and its required node affinity.
pub fn matches(spec: &PodSpec, name: &str, labels: &BTreeMap<String, String>) -> bool {
    selector_matches(spec, labels) && required_affinity_matches(spec, name, labels)
}

/// Every `nodeSelector` label is the node's.
pub fn selector_matches(spec: &PodSpec, labels: &BTreeMap<String, String>) -> bool {
    spec.node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// No required node affinity, or one of its terms matches (terms are
/// ORed; an empty list of terms, or an empty term, matches nothing).
pub fn required_affinity_matches(
    spec: &PodSpec,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|term| term_matches(term, name, labels))
    })
}

/// A term's expressions (on labels) and fields (`metadata.name`) all hold.
fn term_matches(term: &NodeSelectorTerm, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            requirement_matches(r, value)
        })
}

/// One requirement against the value it names, if the node has one.
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |text: &str| text.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            match requirement.operator.as_str() {
                "Gt" => have > bound,
                _ => have < bound,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{from_value, json};

    use super::*;

    fn spec(value: serde_json::Value) -> PodSpec {
        from_value(json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": value}}}}))
        .unwrap()
    }

    #[test]
    fn terms_are_ored_and_their_requirements_anded() {
        let labels = BTreeMap::from([
            ("zone".to_string(), "a".to_string()),
            ("cpus".into(), "8".into()),
        ]);
        let cases = [
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]),
                false,
            ),
            (
                json!([{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4"]}, {"key": "zone", "operator": "Exists"}]}]),
                true,
            ),
            (
                json!([{"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["4"]}]}]),
                false,
            ),
            (
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]),
                true,
            ),
            (
                json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}, {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]),
                true,
            ),
            (json!([{}]), false),
            (json!([]), false),
        ];
        for (terms, want) in cases {
            assert_eq!(
                matches(&spec(terms.clone()), "n1", &labels),
                want,
                "{terms}"
            );
        }
    }

    #[test]
    fn the_node_selector_counts_too() {
        let labels = BTreeMap::from([("disk".to_string(), "ssd".to_string())]);
        let mut pod = PodSpec::default();
        assert!(matches(&pod, "n1", &labels));
        pod.node_selector = Some(BTreeMap::from([("disk".into(), "hdd".into())]));
        assert!(!matches(&pod, "n1", &labels));
    }
}
