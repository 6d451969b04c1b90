//! The rules of one schema as a tree: what `compile` builds and
//! `evaluate` walks.

use std::collections::BTreeMap;

use crate::expression::Expression;

/// The rules of one schema, as a tree that keeps only the nodes with
/// rules at or below them.
#[derive(Debug, Default)]
pub struct Rules {
    pub(super) root: Option<Node>,
}

#[derive(Debug, Default)]
pub(super) struct Node {
    /// The schema's type, which kube shows as the failed value.
    pub(super) type_name: String,
    pub(super) rules: Vec<Rule>,
    pub(super) properties: BTreeMap<String, Node>,
    pub(super) additional: Option<Box<Node>>,
    pub(super) items: Option<Box<Node>>,
    /// The item keys of a `x-kubernetes-list-type: map` list, which
    /// correlate new items with old ones; None for other lists, whose
    /// items have no old value.
    pub(super) map_keys: Option<Vec<String>>,
}

#[derive(Debug)]
pub(super) struct Rule {
    pub(super) expression: Expression,
    pub(super) message: String,
    pub(super) message_expression: Option<Expression>,
    pub(super) reason: Option<&'static str>,
    /// `fieldPath` without its leading dot: where the cause points,
    /// below the rule's node.
    pub(super) field_path: Option<String>,
    pub(super) optional_old_self: bool,
}

impl Rule {
    pub(super) fn transition(&self) -> bool {
        self.expression.reads("oldSelf")
    }

    /// kube's ruleErrorString: the message, else the rule.
    pub(super) fn error_string(&self) -> &str {
        match self.message.as_str() {
            "" => self.expression.source.trim(),
            message => message,
        }
    }

    /// kube's ruleMessageOrDefault.
    pub(super) fn message_or_default(&self) -> String {
        match self.message.as_str() {
            "" => format!("failed rule: {}", self.error_string()),
            message => message.to_string(),
        }
    }
}

impl Rules {
    /// Whether the schema holds no rule at all.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }
}
