//! kubectl's cell formats, shared by the kinds' tables.

use serde_json::Value;

use super::validation::items;
use crate::registry::strategy::Column;

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

/// `"a=b,c=d"` from a string map, as kubectl shows selectors.
pub fn map_string(value: &Value) -> String {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
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
    let formatted = map_string(labels);
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
