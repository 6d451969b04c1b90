//! Label and field selectors, as the API server reads them from
//! `labelSelector` and `fieldSelector`.

use serde_json::Value;

/// A parsed selector; matches everything when empty.
#[derive(Clone, Debug, Default)]
pub(super) struct Selectors {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

#[derive(Clone, Debug)]
enum LabelRequirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug)]
struct FieldRequirement {
    path: String,
    value: String,
    equal: bool,
}

impl Selectors {
    /// Parses both selectors; the error is kube's message for a bad one.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Selectors, String> {
        let labels = match labels {
            Some(text) => split_terms(text)
                .iter()
                .map(|t| parse_label(t))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let fields = match fields {
            Some(text) => text
                .split(',')
                .filter(|t| !t.trim().is_empty())
                .map(parse_field)
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Selectors { labels, fields })
    }

    /// Whether `object` matches.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|r| match r {
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
            LabelRequirement::In(k, values) => {
                label(k).is_some_and(|v| values.iter().any(|x| x == v))
            }
            LabelRequirement::NotIn(k, values) => {
                !label(k).is_some_and(|v| values.iter().any(|x| x == v))
            }
        });
        labels_match
            && self.fields.iter().all(|r| {
                let actual = field_value(object, &r.path);
                (actual == r.value) == r.equal
            })
    }
}

/// Splits on commas outside parentheses (`a in (x,y),b` is two terms).
fn split_terms(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    terms
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_label(term: &str) -> Result<LabelRequirement, String> {
    let bad = || format!("unable to parse requirement: {term:?}");
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelRequirement::NotExists(key.trim().to_string()));
    }
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            if k.is_empty() {
                return Err(bad());
            }
            return Ok(if negated {
                LabelRequirement::NotIn(k, vec![v])
            } else {
                LabelRequirement::In(k, vec![v])
            });
        }
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] => Ok(LabelRequirement::Exists(key.to_string())),
        [key, rest] => {
            let rest = rest.trim();
            let (negated, list) = if let Some(list) = rest.strip_prefix("notin") {
                (true, list)
            } else if let Some(list) = rest.strip_prefix("in") {
                (false, list)
            } else {
                return Err(bad());
            };
            let list = list.trim();
            let inner = list
                .strip_prefix('(')
                .and_then(|l| l.strip_suffix(')'))
                .ok_or_else(bad)?;
            let values = inner.split(',').map(|v| v.trim().to_string()).collect();
            Ok(if negated {
                LabelRequirement::NotIn(key.to_string(), values)
            } else {
                LabelRequirement::In(key.to_string(), values)
            })
        }
        _ => Err(bad()),
    }
}

fn parse_field(term: &str) -> Result<FieldRequirement, String> {
    for (op, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((path, value)) = term.split_once(op) {
            return Ok(FieldRequirement {
                path: path.trim().to_string(),
                value: value.trim().to_string(),
                equal,
            });
        }
    }
    Err(format!(
        "invalid selector: '{term}'; can't understand '{term}'"
    ))
}

/// A dotted path's value as a string ("" when absent).
fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for part in path.split('.') {
        current = &current[part];
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "a", "labels": {"app": "web", "tier": "fe"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    fn matches(labels: Option<&str>, fields: Option<&str>) -> bool {
        Selectors::parse(labels, fields).unwrap().matches(&pod())
    }

    #[test]
    fn label_selectors() {
        assert!(matches(Some("app=web"), None));
        assert!(matches(Some("app==web,tier"), None));
        assert!(!matches(Some("app!=web"), None));
        assert!(matches(Some("tier in (fe, be),!missing"), None));
        assert!(!matches(Some("tier notin (fe,be)"), None));
        assert!(matches(Some("env notin (prod)"), None));
        assert!(!matches(Some("missing"), None));
        assert!(Selectors::parse(Some("app in fe"), None).is_err());
    }

    #[test]
    fn field_selectors() {
        assert!(matches(None, Some("spec.nodeName=n1,metadata.namespace=a")));
        assert!(matches(None, Some("status.phase!=Succeeded")));
        assert!(!matches(None, Some("metadata.name=q")));
        assert!(matches(None, Some("spec.schedulerName=")));
        assert!(Selectors::parse(None, Some("nonsense")).is_err());
    }
}
