//! `x-kubernetes-validations`: CEL rules at the nodes of a CRD's schema.
//! Each rule sees the value at its node as `self`; a transition rule
//! (one that reads `oldSelf`) also sees the value the stored object had
//! there, and runs only on updates that have one (or always, with
//! `optionalOldSelf`, `oldSelf` then being a CEL optional). Rules are
//! compiled once per CRD generation ([`compile`]); the CRD's own
//! validation refuses one that does not compile, with kube's causes.
//! A failed rule is a cause at its node ([`evaluate`]), in kube's words.

mod compile;
mod evaluate;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::expression::Expression;

pub use compile::{check, field_schema};

/// The rules of one schema, as a tree that keeps only the nodes with
/// rules at or below them.
#[derive(Debug, Default)]
pub struct Rules {
    root: Option<Node>,
}

#[derive(Debug, Default)]
struct Node {
    /// The schema's type, which kube shows as the failed value.
    type_name: String,
    rules: Vec<Rule>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    /// The item keys of a `x-kubernetes-list-type: map` list, which
    /// correlate new items with old ones; None for other lists, whose
    /// items have no old value.
    map_keys: Option<Vec<String>>,
}

#[derive(Debug)]
struct Rule {
    expression: Expression,
    message: String,
    message_expression: Option<Expression>,
    reason: Option<&'static str>,
    /// `fieldPath` without its leading dot: where the cause points,
    /// below the rule's node.
    field_path: Option<String>,
    optional_old_self: bool,
}

impl Rule {
    fn transition(&self) -> bool {
        self.expression.reads("oldSelf")
    }

    /// kube's ruleErrorString: the message, else the rule.
    fn error_string(&self) -> &str {
        match self.message.as_str() {
            "" => self.expression.source.trim(),
            message => message,
        }
    }

    /// kube's ruleMessageOrDefault.
    fn message_or_default(&self) -> String {
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
