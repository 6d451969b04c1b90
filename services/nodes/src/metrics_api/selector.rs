//! Label selectors as the API takes them in `?labelSelector=` (`a=b`,
//! `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`), for the
//! metrics lists (`kubectl top pods -l app=web`).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; the empty one selects everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits at commas outside parentheses.
fn terms(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn key(text: &str) -> Result<String, String> {
    let key = text.trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    valid
        .then(|| key.to_string())
        .ok_or_else(|| format!("invalid label key {key:?}"))
}

fn set(text: &str) -> Result<Vec<String>, String> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("{text:?} is not a set such as (a,b)"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for term in terms(text)
            .into_iter()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let requirement = if let Some((k, v)) = term.split_once("!=") {
                Requirement::NotEquals(key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(key(k)?, v.trim().to_string())
            } else if let Some((k, v)) = term.split_once(" notin ") {
                Requirement::NotIn(key(k)?, set(v)?)
            } else if let Some((k, v)) = term.split_once(" in ") {
                Requirement::In(key(k)?, set(v)?)
            } else if let Some(k) = term.strip_prefix('!') {
                Requirement::NotExists(key(k)?)
            } else {
                Requirement::Exists(key(term)?)
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_form_of_requirement_matches() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "tier in (front, back)",
            "tier notin (back)",
            "app",
            "!missing",
            "app=web,tier",
        ];
        for text in yes {
            assert!(
                LabelSelector::parse(text).unwrap().matches(Some(&l)),
                "{text}"
            );
        }
        let no = [
            "app=db",
            "tier in (back)",
            "missing",
            "!app",
            "app=web,tier=back",
        ];
        for text in no {
            assert!(
                !LabelSelector::parse(text).unwrap().matches(Some(&l)),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_selectors_are_refused() {
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("=b").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }
}
