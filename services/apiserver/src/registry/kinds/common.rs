//! What the kinds beyond the core workloads share: the causes Kubernetes
//! words its common refusals with, and kubectl's cell formats.

use serde_json::Value;

use super::super::strategy::Column;
use crate::error::Cause;

/// The column the default table convertor shows for types without
/// printer columns of their own (Roles, LimitRanges): an RFC 3339 date.
pub const CREATED_AT: Column = Column::new(
    "Created At",
    "date",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

pub fn created_at_cell(obj: &Value) -> Value {
    obj["metadata"]["creationTimestamp"].clone()
}

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

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>`
/// for an empty or absent selector.
pub fn label_selector(selector: &Value) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        let value = value.as_str().unwrap_or("");
        parts.push((key.clone(), format!("{key}={value}")));
    }
    for (_, expr) in items(&selector["matchExpressions"]) {
        let key = expr["key"].as_str().unwrap_or("");
        let mut values: Vec<&str> = items(&expr["values"])
            .filter_map(|(_, v)| v.as_str())
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let part = match expr["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        };
        parts.push((key.to_string(), part));
    }
    if parts.is_empty() {
        return "<none>".into();
    }
    parts.sort();
    parts
        .into_iter()
        .map(|(_, p)| p)
        .collect::<Vec<_>>()
        .join(",")
}

/// `labels.FormatLabels`: `k=v` sorted by key, `<none>` when empty.
pub fn label_map(labels: &Value) -> String {
    let formatted = super::map_string(labels);
    if formatted.is_empty() {
        "<none>".into()
    } else {
        formatted
    }
}

/// kubectl's short forms of access modes, in its fixed order.
pub fn access_modes(modes: &Value) -> String {
    let modes: Vec<&str> = items(modes).filter_map(|(_, m)| m.as_str()).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(long, _)| modes.contains(long))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// At most `max` entries joined by `,`, then ` + N more...`; `<unset>`
/// when there are none (listWithMoreString).
pub fn list_with_more(list: &[String], max: usize) -> String {
    if list.is_empty() {
        return "<unset>".into();
    }
    let shown = list[..list.len().min(max)].join(",");
    if list.len() > max {
        format!("{shown} + {} more...", list.len() - max)
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_sort_by_key_and_show_none_when_empty() {
        let sel = json!({"matchLabels": {"tier": "db", "app": "web"},
                         "matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a"]}]});
        assert_eq!(label_selector(&sel), "app=web,env in (a,b),tier=db");
        assert_eq!(label_selector(&json!({})), "<none>");
        assert_eq!(label_selector(&Value::Null), "<none>");
    }

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

    #[test]
    fn access_modes_and_lists() {
        assert_eq!(
            access_modes(&json!(["ReadWriteMany", "ReadWriteOnce"])),
            "RWO,RWX"
        );
        let list: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(list_with_more(&list, 3), "a,b,c + 1 more...");
        assert_eq!(list_with_more(&[], 3), "<unset>");
    }
}
