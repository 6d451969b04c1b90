//! How large and how deep an object may become, whoever makes it: a
//! decoded body (the codec) or a patch (`patch.rs`).
//!
//! Depth matters twice: code that walks a value recursively (decoding it
//! into a type, encoding it, dropping it) overflows its stack on a value
//! nested some tens of thousands deep, and whatever the server stores it
//! must read back, with the managed fields nesting a few levels deeper
//! than the object, through serde_json's 127 levels.

use serde_json::Value;

/// The deepest a decoded body, or what a patch adds to an object, may nest.
pub const MAX_DEPTH: usize = 100;

/// What the `copy` operations of one JSON patch may add up to, in bytes
/// of JSON: kube-apiserver's `JSONPatchMaxCopyBytes`, which it sets to
/// its largest request body (3 MB).
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// How deeply `value` nests: 0 for a scalar, 1 for `[]` or `{"a": 1}`.
/// Walks with a stack of its own, so a value too deep to walk
/// recursively is measured too.
pub fn depth(value: &Value) -> usize {
    measure(value).depth
}

/// A value's depth, its size as compact JSON (within a few bytes: string
/// escapes are not counted) and how many values it holds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measure {
    pub depth: usize,
    pub bytes: usize,
    pub values: usize,
}

pub fn measure(value: &Value) -> Measure {
    let mut found = Measure::default();
    let mut pending = vec![(value, 0usize)];
    while let Some((value, level)) = pending.pop() {
        found.values += 1;
        found.bytes += match value {
            Value::Null => 4,
            Value::Bool(b) => 4 + usize::from(!*b),
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                pending.extend(items.iter().map(|child| (child, level + 1)));
                1 + items.len().max(1)
            }
            Value::Object(members) => {
                // `"key":` and a comma or the closing brace per member.
                let keys: usize = members.keys().map(|k| k.len() + 4).sum();
                pending.extend(members.values().map(|child| (child, level + 1)));
                1 + keys + usize::from(members.is_empty())
            }
        };
        if value.is_array() || value.is_object() {
            found.depth = found.depth.max(level + 1);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn measures_depth_and_json_size() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}], "c": 2})), 4);
        for value in [
            json!({"a": [1, {"b": []}], "c": "two", "d": null, "e": true, "f": false}),
            json!([]),
            json!({}),
            json!([1.5, -3, "x"]),
        ] {
            let found = measure(&value);
            assert_eq!(found.bytes, value.to_string().len(), "{value}");
        }
        assert_eq!(measure(&json!({"a": [1, 2]})).values, 4);
    }

    #[test]
    fn a_value_too_deep_for_recursion_is_measured() {
        let mut deep = json!(0);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 100_000);
        // serde_json's drop is recursive too: take it apart by hand.
        while let Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or_default();
        }
    }
}
