//! The causes Kubernetes words its common refusals with, and the small
//! readers the kinds' validations share.

use serde_json::Value;

use crate::error::Cause;

/// How a value appears in a message: strings bare (then quoted by the
/// message), everything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// `Invalid value: <value>: why`, with numbers unquoted as Go prints them.
pub fn invalid(field: impl Into<String>, value: &Value, why: &str) -> Cause {
    let shown = match value {
        Value::Null => "\"\"".to_string(),
        other => shown(other),
    };
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {why}"),
    }
}

/// `Required value: why`.
pub fn required(field: impl Into<String>, why: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field: field.into(),
        message: format!("Required value: {why}"),
    }
}

/// `Unsupported value: "x": supported values: "a", "b"`.
pub fn unsupported(field: impl Into<String>, value: &Value, allowed: &[&str]) -> Cause {
    let allowed: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    let shown = match value {
        Value::Null => "\"\"".to_string(),
        other => shown(other),
    };
    Cause {
        reason: "FieldValueNotSupported",
        field: field.into(),
        message: format!(
            "Unsupported value: {shown}: supported values: {}",
            allowed.join(", ")
        ),
    }
}

/// The string at `pointer`, `""` when absent.
pub fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// An Unsupported cause when the string at `pointer` is set and not one
/// of `allowed` (absent values are left to defaults or Required checks).
pub fn check_enum(
    obj: &Value,
    pointer: &str,
    field: &str,
    allowed: &[&str],
    causes: &mut Vec<Cause>,
) {
    match obj.pointer(pointer) {
        None | Some(Value::Null) => {}
        Some(value) if value.as_str().is_some_and(|v| allowed.contains(&v)) => {}
        Some(value) => causes.push(unsupported(field, value, allowed)),
    }
}

/// An Invalid cause when the integer at `pointer` is below `min`.
pub fn check_min(obj: &Value, pointer: &str, field: &str, min: i64, causes: &mut Vec<Cause>) {
    if let Some(n) = obj.pointer(pointer).and_then(Value::as_i64) {
        if n < min {
            let why = format!("must be greater than or equal to {min}");
            causes.push(invalid(field, &Value::from(n), &why));
        }
    }
}

/// `field: Invalid value: <new>: field is immutable` when the value at
/// `pointer` changed (ValidateImmutableField).
pub fn immutable(new: &Value, old: &Value, pointer: &str, field: &str) -> Option<Cause> {
    let (n, o) = (new.pointer(pointer), old.pointer(pointer));
    let absent = |v: Option<&Value>| v.is_none_or(Value::is_null);
    if n == o || (absent(n) && absent(o)) {
        return None;
    }
    Some(invalid(
        field,
        n.unwrap_or(&Value::Null),
        "field is immutable",
    ))
}

/// Items of the array at `value` with their index.
pub fn items(value: &Value) -> impl Iterator<Item = (usize, &Value)> {
    value.as_array().into_iter().flatten().enumerate()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn causes_word_values_as_kubernetes_does() {
        let c = invalid("spec.maxReplicas", &json!(0), "must be greater than 0");
        assert_eq!(c.message, "Invalid value: 0: must be greater than 0");
        let c = unsupported("x", &json!("Always"), &["OnFailure", "Never"]);
        assert_eq!(
            c.message,
            "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
        let old = json!({"a": "x"});
        assert!(immutable(&old, &old, "/a", "a").is_none());
        let c = immutable(&json!({"a": "y"}), &old, "/a", "a").unwrap();
        assert_eq!(c.message, "Invalid value: \"y\": field is immutable");
    }
}
