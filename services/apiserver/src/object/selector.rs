//! Label selectors (the full grammar: `=`, `==`, `!=`, `in`, `notin`,
//! exists, `!` not exists, `>`/`<`) and field selectors (`=`, `==`, `!=`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Equals(String),
    NotEquals(String),
    /// Sets, as kube keeps them: a selector of thousands of values costs
    /// each object a lookup, not a scan.
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
    Greater(i64),
    Less(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        split_top_level(text)
            .into_iter()
            .filter(|part| !part.trim().is_empty())
            .map(|part| parse_requirement(part.trim()))
            .collect::<Result<_, _>>()
            .map(LabelSelector)
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`
    /// with In, NotIn, Exists, DoesNotExist); absent or `{}` matches all.
    pub fn from_object(selector: &Value) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            let value = value.as_str().unwrap_or_default().to_string();
            let key = checked_key(key, key)?;
            requirements.push(Requirement {
                key,
                op: Op::Equals(value),
            });
        }
        let expressions = selector["matchExpressions"].as_array();
        for expression in expressions.into_iter().flatten() {
            let key = expression["key"].as_str().unwrap_or_default();
            let values = expression["values"].as_array().into_iter().flatten();
            let values: BTreeSet<String> = values
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            let op = match expression["operator"].as_str().unwrap_or_default() {
                "In" => Op::In(values),
                "NotIn" => Op::NotIn(values),
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(SelectorError(format!(
                        "{other:?} is not a valid label selector operator"
                    )))
                }
            };
            requirements.push(Requirement {
                key: checked_key(key, key)?,
                op,
            });
        }
        Ok(LabelSelector(requirements))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_with(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
    }

    /// Matches labels read by `get` (a label's value, if it has one).
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|req| {
            let value = get(&req.key);
            match &req.op {
                Op::Equals(v) => value == Some(v.as_str()),
                Op::NotEquals(v) => value != Some(v.as_str()),
                Op::In(vs) => value.is_some_and(|x| vs.contains(x)),
                Op::NotIn(vs) => !value.is_some_and(|x| vs.contains(x)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::Greater(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Less(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }
}

/// Splits on commas that are not inside `( )`.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    let bad = || SelectorError(part.to_string());
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement {
            key: checked_key(key.trim(), part)?,
            op: Op::DoesNotExist,
        });
    }
    for (token, make) in [(" notin ", true), (" in ", false)] {
        if let Some((key, rest)) = part.split_once(token) {
            let list = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            let values: BTreeSet<String> = list.split(',').map(|v| v.trim().to_string()).collect();
            let op = if make {
                Op::NotIn(values)
            } else {
                Op::In(values)
            };
            return Ok(Requirement {
                key: checked_key(key.trim(), part)?,
                op,
            });
        }
    }
    for (token, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((key, value)) = part.split_once(token) {
            let value = value.trim().to_string();
            let op = match kind {
                0 => Op::NotEquals(value),
                1 => Op::Equals(value),
                2 => Op::Greater(value.parse().map_err(|_| bad())?),
                _ => Op::Less(value.parse().map_err(|_| bad())?),
            };
            return Ok(Requirement {
                key: checked_key(key.trim(), part)?,
                op,
            });
        }
    }
    Ok(Requirement {
        key: checked_key(part, part)?,
        op: Op::Exists,
    })
}

fn checked_key(key: &str, part: &str) -> Result<String, SelectorError> {
    if super::meta::is_qualified_name(key) {
        Ok(key.to_string())
    } else {
        Err(SelectorError(part.to_string()))
    }
}

/// A parsed field selector: `field=value` / `field!=value` terms, ANDed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError(part.to_string()));
            };
            terms.push((field.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `metadata.name=x`, which lets a list read one key.
    pub fn exact_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    /// `value_of(field)` gives the object's value for a supported field.
    pub fn matches(&self, value_of: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let have = value_of(field).unwrap_or_default();
            (have == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn selector_objects() {
        let l = labels(json!({"app": "seed", "tier": "web"}));
        let pick = |v: Value| LabelSelector::from_object(&v).unwrap().matches(Some(&l));
        assert!(pick(json!({})));
        assert!(pick(json!({"matchLabels": {"app": "seed"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]})));
        assert!(!pick(
            json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]})
        ));
        assert!(!pick(
            json!({"matchExpressions": [{"key": "x", "operator": "Exists"}]})
        ));
        let bad = json!({"matchExpressions": [{"key": "x", "operator": "Near"}]});
        assert!(LabelSelector::from_object(&bad).is_err());
    }

    #[test]
    fn full_label_grammar() {
        let l = labels(json!({"app": "seed", "tier": "web", "n": "5"}));
        let yes = [
            "app=seed",
            "app==seed",
            "app!=x",
            "app in (seed,x)",
            "foo notin (a)",
            "app",
            "!foo",
            "n>3",
            "n<9",
            "app in (seed,x),!foo",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s}");
        }
        let no = ["app=x", "app notin (seed)", "!app", "n>5", "foo"];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s}");
        }
    }

    #[test]
    fn bad_label_selector() {
        assert!(LabelSelector::parse("app in seed").is_err());
        assert!(LabelSelector::parse("bad key=1").is_err());
    }

    #[test]
    fn field_selector_terms() {
        let s = FieldSelector::parse("status.phase=Running,metadata.name!=x").unwrap();
        assert!(s.matches(|f| Some(if f == "status.phase" { "Running" } else { "y" }.to_string())));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
