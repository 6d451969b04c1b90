//! Object metadata: accessors on JSON objects and the name, label and
//! annotation rules of apimachinery's validation.

use serde_json::{Map, Value};

use crate::error::Cause;

pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

pub fn namespace(obj: &Value) -> &str {
    obj["metadata"]["namespace"].as_str().unwrap_or("")
}

pub fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or("")
}

pub fn resource_version(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

/// `metadata`, created if missing or not an object.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = Value::Object(Map::new());
    }
    obj["metadata"]
        .as_object_mut()
        .expect("just made an object")
}

/// Whether two objects are equal but for the metadata fields `ignored`
/// (no metadata counts as empty metadata), without copying either.
pub fn equal_but_for(a: &Value, b: &Value, ignored: &[&str]) -> bool {
    let empty = Value::Object(Map::new());
    let metadata = |v| Value::get(v, "metadata").unwrap_or(&empty);
    equal_leaving_out(a, b, &["metadata"]) && equal_leaving_out(metadata(a), metadata(b), ignored)
}

/// Whether two values are equal, leaving out the keys `ignored` if both
/// are maps (without copying either).
pub fn equal_leaving_out(a: &Value, b: &Value, ignored: &[&str]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let kept = |m: &'_ Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| !ignored.contains(&k.as_str()))
            .count()
    };
    kept(a) == kept(b)
        && (a.iter())
            .filter(|(k, _)| !ignored.contains(&k.as_str()))
            .all(|(k, v)| b.get(k) == Some(v))
}

pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj["metadata"]["labels"].as_object()
}

pub fn set_resource_version(obj: &mut Value, revision: i64) {
    metadata_mut(obj).insert(
        "resourceVersion".into(),
        Value::String(revision.to_string()),
    );
}

pub fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// A DNS-1123 label: lower-case alphanumerics and '-', alphanumeric ends.
pub fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !s.is_empty()
        && s.len() <= DNS1123_LABEL_MAX
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && s.split('.').all(is_dns1123_label)
}

/// Label values and the name part of keys: ≤63 of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends (an empty value is allowed for values).
fn is_qualified_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// `[prefix/]name` as label and annotation keys are written.
pub fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_qualified_part(name),
        None => is_qualified_part(key),
    }
}

pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_qualified_part(value)
}

const DNS_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Which rule an object's name follows (Kubernetes picks one per type).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NameRule {
    Subdomain,
    Label,
    /// Any name usable as one URL path segment (RBAC: `system:node`).
    PathSegment,
}

const PATH_SEGMENT_MSG: &str = "may not be '.' or '..', and may not contain '/' or '%'";

pub fn is_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// The metadata checks every type shares: name, labels, annotations.
pub fn validate_metadata(obj: &Value, rule: NameRule) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = name(obj);
    if name.is_empty() {
        causes.push(Cause::required("metadata.name"));
    } else {
        let (ok, msg) = match rule {
            NameRule::Subdomain => (is_dns1123_subdomain(name), DNS_SUBDOMAIN_MSG),
            NameRule::Label => (is_dns1123_label(name), DNS_LABEL_MSG),
            NameRule::PathSegment => (is_path_segment(name), PATH_SEGMENT_MSG),
        };
        if !ok {
            causes.push(Cause::invalid("metadata.name", name, msg));
        }
    }
    causes.extend(validate_string_map(obj, "labels", true));
    causes.extend(validate_string_map(obj, "annotations", false));
    causes
}

fn validate_string_map(obj: &Value, field: &str, values_are_labels: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(map) = obj["metadata"][field].as_object() else {
        return causes;
    };
    for (key, value) in map {
        let path = format!("metadata.{field}");
        if !is_qualified_name(key) {
            causes.push(Cause::invalid(&path, key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
        }
        match value.as_str() {
            Some(v) if values_are_labels && !is_label_value(v) => {
                causes.push(Cause::invalid(&path, v, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
            }
            Some(_) => {}
            None => causes.push(Cause::invalid(
                format!("{path}[{key}]"),
                &value.to_string(),
                "must be a string",
            )),
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_but_for_leaves_out_only_the_named_metadata_fields() {
        let a = json!({"spec": {"x": 1}, "metadata": {"name": "a", "resourceVersion": "1"}});
        let b = json!({"spec": {"x": 1}, "metadata": {"name": "a", "resourceVersion": "2"}});
        assert!(equal_but_for(&a, &b, &["resourceVersion"]));
        assert!(!equal_but_for(&a, &b, &[]));
        let renamed = json!({"spec": {"x": 1}, "metadata": {"name": "b"}});
        assert!(!equal_but_for(&a, &renamed, &["resourceVersion"]));
        let changed = json!({"spec": {"x": 2}, "metadata": {"name": "a"}});
        assert!(!equal_but_for(&a, &changed, &["resourceVersion"]));
        let more = json!({"spec": {"x": 1}, "status": {}, "metadata": {"name": "a"}});
        assert!(!equal_but_for(&a, &more, &["resourceVersion"]));
        let bare = json!({"spec": {}});
        let with_empty = json!({"spec": {}, "metadata": {"resourceVersion": "3"}});
        assert!(equal_but_for(&bare, &with_empty, &["resourceVersion"]));
    }

    #[test]
    fn names() {
        assert!(is_dns1123_label("web-1"));
        assert!(!is_dns1123_label("Web"));
        assert!(!is_dns1123_label("-a"));
        assert!(is_dns1123_subdomain("a.b-c"));
        assert!(!is_dns1123_subdomain("a..b"));
    }

    #[test]
    fn label_keys_and_values() {
        assert!(is_qualified_name("app.kubernetes.io/name"));
        assert!(!is_qualified_name("bad key"));
        assert!(is_label_value(""));
        assert!(!is_label_value("-x"));
    }

    #[test]
    fn metadata_causes_name_the_field() {
        let obj = json!({"metadata": {"name": "Bad_Name", "labels": {"ok": "-no"}}});
        let causes = validate_metadata(&obj, NameRule::Subdomain);
        assert_eq!(causes.len(), 2);
        assert_eq!(causes[0].field, "metadata.name");
        assert_eq!(causes[1].field, "metadata.labels");
    }
}
