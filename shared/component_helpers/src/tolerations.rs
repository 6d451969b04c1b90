//! kube's `Toleration.ToleratesTaint`.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `toleration` tolerates `taint`: the same effect (or any), the
/// same key (or any), and for `Equal` (an empty operator is `Equal`) the
/// same value; `Exists` takes any value. (kube's validation refuses an
/// empty key without `Exists`, so such a toleration never reaches here
/// in a kube cluster.)
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{from_value, json};

    use super::*;

    fn toleration(value: serde_json::Value) -> Toleration {
        from_value(value).unwrap()
    }

    #[test]
    fn kubes_rules() {
        let taint: Taint =
            from_value(json!({"key": "k", "value": "v", "effect": "NoExecute"})).unwrap();
        let cases = [
            (json!({"key": "k", "value": "v"}), true),
            (json!({"key": "k", "operator": "Equal", "value": "v"}), true),
            (json!({"key": "k", "value": "w"}), false),
            (json!({"key": "k", "operator": "Exists"}), true),
            (json!({"operator": "Exists"}), true),
            (json!({"key": "other", "operator": "Exists"}), false),
            (
                json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"}),
                false,
            ),
            (
                json!({"key": "k", "operator": "Exists", "effect": "NoExecute"}),
                true,
            ),
            (json!({"key": "k", "operator": "Gt", "value": "v"}), false),
        ];
        for (given, want) in cases {
            assert_eq!(
                tolerates(&toleration(given.clone()), &taint),
                want,
                "{given}"
            );
        }
    }
}
