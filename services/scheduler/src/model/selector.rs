//! Label selectors (kube-core's `Selector`, with kube's nil-means-nothing
//! rule) and node selector terms (`nodeAffinity`'s In, NotIn, Exists,
//! DoesNotExist, Gt, Lt and `matchFields` on `metadata.name`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Selector, SelectorExt};

use super::label_digest;

/// Labels of an object that may have none.
pub type Labels = BTreeMap<String, String>;

static NO_LABELS: Labels = BTreeMap::new();

/// The labels of an object's metadata, or an empty set.
pub fn labels_of(labels: &Option<Labels>) -> &Labels {
    labels.as_ref().unwrap_or(&NO_LABELS)
}

/// A compiled label selector. A missing selector or one that does not parse
/// selects nothing; an empty one selects everything (kube's
/// `LabelSelectorAsSelector`).
#[derive(Debug, Clone, PartialEq)]
pub enum LabelMatcher {
    Nothing,
    Everything,
    /// A selector, with the digest bits every label set it matches has.
    Selector(Selector, u64),
    /// Every one must match (a pod's workloads' selectors combined).
    AllOf(Vec<LabelMatcher>),
}

impl LabelMatcher {
    pub fn new(selector: Option<&LabelSelector>) -> LabelMatcher {
        let Some(selector) = selector else {
            return LabelMatcher::Nothing;
        };
        match Selector::try_from(selector.clone()) {
            Ok(parsed) if parsed.selects_all() => LabelMatcher::Everything,
            Ok(parsed) => {
                let required = label_digest::required_by(&parsed);
                LabelMatcher::Selector(parsed, required)
            }
            Err(_) => LabelMatcher::Nothing,
        }
    }

    /// A selector requiring every pair of `labels` (a Service's selector, a
    /// ReplicaSet's `matchLabels`).
    pub fn from_map(labels: &Labels) -> LabelMatcher {
        LabelMatcher::new(Some(&LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: None,
        }))
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            LabelMatcher::Nothing => false,
            LabelMatcher::Everything => true,
            LabelMatcher::Selector(selector, _) => selector.matches(labels),
            LabelMatcher::AllOf(all) => all.iter().all(|m| m.matches(labels)),
        }
    }

    /// The digest bits every label set this matches has (see
    /// [`label_digest`]); nothing matches `Nothing`, whatever it requires.
    pub fn required_digest(&self) -> u64 {
        match self {
            LabelMatcher::Nothing | LabelMatcher::Everything => 0,
            LabelMatcher::Selector(_, required) => *required,
            LabelMatcher::AllOf(all) => all.iter().fold(0, |d, m| d | m.required_digest()),
        }
    }

    pub fn is_nothing(&self) -> bool {
        matches!(self, LabelMatcher::Nothing)
    }
}

/// One compiled `NodeSelectorRequirement`.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
    /// An operator or value kube's validation would refuse: never matches.
    Invalid,
}

impl Requirement {
    fn compile(requirement: &NodeSelectorRequirement) -> Requirement {
        let key = requirement.key.clone();
        let values = requirement.values.clone().unwrap_or_default();
        let single_int = || match values.as_slice() {
            [one] => one.parse::<i64>().ok(),
            _ => None,
        };
        match requirement.operator.as_str() {
            "In" => Requirement::In(key, values),
            "NotIn" => Requirement::NotIn(key, values),
            "Exists" => Requirement::Exists(key),
            "DoesNotExist" => Requirement::DoesNotExist(key),
            "Gt" => single_int().map_or(Requirement::Invalid, |v| Requirement::Gt(key, v)),
            "Lt" => single_int().map_or(Requirement::Invalid, |v| Requirement::Lt(key, v)),
            _ => Requirement::Invalid,
        }
    }

    fn matches(&self, labels: &Labels) -> bool {
        let number = |key: &str| labels.get(key).and_then(|v| v.parse::<i64>().ok());
        match self {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
            Requirement::Gt(key, bound) => number(key).is_some_and(|v| v > *bound),
            Requirement::Lt(key, bound) => number(key).is_some_and(|v| v < *bound),
            Requirement::Invalid => false,
        }
    }
}

/// One compiled `NodeSelectorTerm`: its requirements all hold. A term with no
/// requirement at all matches no node (kube's rule).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTerm {
    labels: Vec<Requirement>,
    /// `matchFields` requirements, on the node's name (the only field kube supports).
    name: Vec<Requirement>,
}

impl NodeTerm {
    pub fn compile(term: &NodeSelectorTerm) -> NodeTerm {
        let compile_all = |list: &Option<Vec<NodeSelectorRequirement>>| {
            list.iter()
                .flatten()
                .map(Requirement::compile)
                .collect::<Vec<_>>()
        };
        let mut name = compile_all(&term.match_fields);
        if term
            .match_fields
            .iter()
            .flatten()
            .any(|f| f.key != "metadata.name")
        {
            name.push(Requirement::Invalid);
        }
        NodeTerm {
            labels: compile_all(&term.match_expressions),
            name,
        }
    }

    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        if self.labels.is_empty() && self.name.is_empty() {
            return false;
        }
        if !self.labels.iter().all(|r| r.matches(labels)) {
            return false;
        }
        if self.name.is_empty() {
            return true;
        }
        let fields = Labels::from([("metadata.name".to_string(), node_name.to_string())]);
        self.name.iter().all(|r| r.matches(&fields))
    }

    /// Node names this term is limited to by `matchFields metadata.name In`, if any.
    pub fn required_names(&self) -> Option<Vec<String>> {
        self.name.iter().find_map(|r| match r {
            Requirement::In(_, values) => Some(values.clone()),
            _ => None,
        })
    }
}

/// A compiled `NodeSelector`: its terms are ORed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeTerms {
    terms: Vec<NodeTerm>,
}

impl NodeTerms {
    pub fn compile(selector: &NodeSelector) -> NodeTerms {
        NodeTerms {
            terms: selector
                .node_selector_terms
                .iter()
                .map(NodeTerm::compile)
                .collect(),
        }
    }

    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        self.terms.iter().any(|t| t.matches(node_name, labels))
    }

    /// The node names the terms allow, when every term names its nodes
    /// (`matchFields metadata.name In [...]`): the filter then needs only those.
    pub fn required_names(&self) -> Option<Vec<String>> {
        let mut names = Vec::new();
        for term in &self.terms {
            names.extend(term.required_names()?);
        }
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_matcher_follows_kube_nil_and_empty_rules() {
        assert!(!LabelMatcher::new(None).matches(&labels(&[])));
        assert!(LabelMatcher::new(Some(&LabelSelector::default())).matches(&labels(&[])));
        let app = LabelMatcher::from_map(&labels(&[("app", "web")]));
        assert!(app.matches(&labels(&[("app", "web"), ("x", "y")])));
        assert!(!app.matches(&labels(&[("app", "db")])));
    }

    #[test]
    fn node_requirements_table() {
        let node = labels(&[("zone", "a"), ("cores", "8")]);
        let cases = [
            (requirement("zone", "In", &["a", "b"]), true),
            (requirement("zone", "In", &["b"]), false),
            (requirement("zone", "NotIn", &["b"]), true),
            (requirement("missing", "NotIn", &["b"]), true),
            (requirement("zone", "Exists", &[]), true),
            (requirement("zone", "DoesNotExist", &[]), false),
            (requirement("cores", "Gt", &["4"]), true),
            (requirement("cores", "Lt", &["4"]), false),
            (requirement("zone", "Gt", &["4"]), false),
            (requirement("cores", "Gt", &["x"]), false),
            (requirement("zone", "Bogus", &["a"]), false),
        ];
        for (req, want) in cases {
            let term = NodeTerm::compile(&NodeSelectorTerm {
                match_expressions: Some(vec![req.clone()]),
                match_fields: None,
            });
            assert_eq!(term.matches("n1", &node), want, "{req:?}");
        }
    }

    #[test]
    fn empty_terms_match_nothing_and_fields_match_names() {
        let empty = NodeTerm::compile(&NodeSelectorTerm::default());
        assert!(!empty.matches("n1", &labels(&[])));
        let by_name = NodeTerm::compile(&NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![requirement("metadata.name", "In", &["n1"])]),
        });
        assert!(by_name.matches("n1", &labels(&[])));
        assert!(!by_name.matches("n2", &labels(&[])));
        assert_eq!(by_name.required_names(), Some(vec!["n1".to_string()]));
    }
}
