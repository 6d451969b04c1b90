//! metav1.LabelSelector evaluation (matchLabels and matchExpressions), as
//! namespaceSelector and objectSelector use it. An absent or empty
//! selector matches everything.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

/// Whether `labels` (absent: none) satisfy `selector`. An operator kube
/// does not know matches nothing (validation refuses it on write).
pub fn matches(selector: Option<&LabelSelector>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    let exact = selector.match_labels.iter().flatten();
    let exact_ok = exact.into_iter().all(|(k, v)| label(k) == Some(v.as_str()));
    let expressions = selector.match_expressions.iter().flatten();
    exact_ok
        && expressions.into_iter().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = label(&e.key);
            let listed = value.is_some_and(|v| values.iter().any(|x| x == v));
            match e.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

/// Whether the selector is absent or empty (matches without looking).
pub fn is_everything(selector: Option<&LabelSelector>) -> bool {
    selector.is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: Value) -> LabelSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn labels_and_expressions_all_have_to_hold() {
        let s = selector(json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "staging"]},
            {"key": "skip", "operator": "DoesNotExist"},
            {"key": "tier", "operator": "NotIn", "values": ["db"]}]}));
        let yes = labels(json!({"team": "a", "env": "prod"}));
        assert!(matches(Some(&s), Some(&yes)));
        for no in [
            json!({"team": "b", "env": "prod"}),
            json!({"team": "a", "env": "dev"}),
            json!({"team": "a", "env": "prod", "skip": ""}),
            json!({"team": "a", "env": "prod", "tier": "db"}),
        ] {
            assert!(!matches(Some(&s), Some(&labels(no.clone()))), "{no}");
        }
        assert!(!matches(Some(&s), None));
        let exists = selector(json!({"matchExpressions": [{"key": "x", "operator": "Exists"}]}));
        assert!(matches(Some(&exists), Some(&labels(json!({"x": ""})))));
        let odd = selector(json!({"matchExpressions": [{"key": "x", "operator": "Gt"}]}));
        assert!(!matches(Some(&odd), Some(&labels(json!({"x": "1"})))));
    }

    #[test]
    fn empty_and_absent_selectors_match_everything() {
        assert!(matches(None, None));
        assert!(matches(Some(&selector(json!({}))), None));
        assert!(is_everything(None) && is_everything(Some(&selector(json!({})))));
        assert!(!is_everything(Some(&selector(
            json!({"matchLabels": {"a": "b"}})
        ))));
    }
}
