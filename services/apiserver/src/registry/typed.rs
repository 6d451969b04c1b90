//! Decoding through the real Kubernetes types (k8s-openapi): a body that
//! does not fit the type is refused, fields the type does not have are
//! found by comparing the input with its typed round trip, and the round
//! trip is the canonical form that gets stored.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug)]
pub struct Decoded {
    pub canonical: Value,
    /// Paths like `spec.bogusField` that the type does not know.
    pub unknown_fields: Vec<String>,
}

pub fn decode<K: DeserializeOwned + Serialize>(value: &Value) -> Result<Decoded, String> {
    // Read from the borrowed tree: no copy of the body to consume.
    let typed = K::deserialize(value).map_err(|e| e.to_string())?;
    let canonical = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut unknown_fields = Vec::new();
    find_unknown(value, &canonical, &mut String::new(), &mut unknown_fields);
    Ok(Decoded {
        canonical,
        unknown_fields,
    })
}

/// Adds to `out` the paths of `input`'s fields that `typed` dropped;
/// `path` (where `input` is) is one buffer, grown and cut back as the
/// walk goes, so a body without unknown fields costs no allocations.
fn find_unknown(input: &Value, typed: &Value, path: &mut String, out: &mut Vec<String>) {
    let depth = path.len();
    match (input, typed) {
        (Value::Object(input), Value::Object(typed)) => {
            for (key, value) in input {
                if depth > 0 {
                    path.push('.');
                }
                path.push_str(key);
                match typed.get(key) {
                    None if !value.is_null() => out.push(path.clone()),
                    Some(t) => find_unknown(value, t, path, out),
                    None => {}
                }
                path.truncate(depth);
            }
        }
        (Value::Array(input), Value::Array(typed)) => {
            for (i, (a, b)) in input.iter().zip(typed).enumerate() {
                use std::fmt::Write;
                let _ = write!(path, "[{i}]");
                find_unknown(a, b, path, out);
                path.truncate(depth);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_named_by_path() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {}},
            "spec": {"bogusField": 1, "containers": [{"name": "c", "image": "i", "nope": true}]}});
        let decoded = decode::<Pod>(&pod).unwrap();
        assert_eq!(
            decoded.unknown_fields,
            vec!["spec.bogusField", "spec.containers[0].nope"]
        );
        assert!(decoded.canonical["spec"].get("bogusField").is_none());
    }

    #[test]
    fn wrong_types_are_refused() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "no"}});
        assert!(decode::<Pod>(&pod).is_err());
    }
}
