//! Running a schema's rules over an object (and, on an update, the
//! stored one), with kube's causes and cost limits.

use std::sync::Arc;

use cel::objects::OptionalValue;
use cel::Value as Cel;
use serde_json::{json, Value};

use super::tree::{Node, Rule, Rules};
use crate::error::Cause;
use crate::expression::cost::CALL_LIMIT_EXCEEDED;
use crate::expression::{to_cel, Activation, Budget, EvalError};

impl Rules {
    /// The causes `obj` breaks; `old` is the stored object on an update.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
        let Some(root) = &self.root else {
            return Vec::new();
        };
        let mut run = Run::default();
        let old = old.map(visible);
        run.node(root, &visible(obj), old.as_ref(), "");
        run.causes
    }
}

/// What rules at the root see of an object: of its metadata, kube shows
/// them only `name` and `generateName`.
fn visible(obj: &Value) -> Value {
    let mut shown = obj.clone();
    if let Some(map) = shown.as_object_mut() {
        let meta = &obj["metadata"];
        let mut kept = json!({});
        for field in ["name", "generateName"] {
            if let Some(v) = meta.get(field) {
                kept[field] = v.clone();
            }
        }
        map.insert("metadata".into(), kept);
    }
    shown
}

#[derive(Default)]
struct Run {
    causes: Vec<Cause>,
    budget: Budget,
    /// A rule passed the cost limit: kube runs no further rules.
    stopped: bool,
}

impl Run {
    fn node(&mut self, node: &Node, value: &Value, old: Option<&Value>, path: &str) {
        if value.is_null() {
            return;
        }
        for rule in &node.rules {
            if self.stopped {
                return;
            }
            self.rule(node, rule, value, old, path);
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    let old_child = old.and_then(|o| o.get(key));
                    if let Some(schema) = node.properties.get(key) {
                        self.node(schema, child, old_child, &join(path, key));
                    } else if let Some(schema) = &node.additional {
                        self.node(schema, child, old_child, &format!("{path}[{key}]"));
                    }
                }
            }
            Value::Array(items) => {
                let Some(schema) = &node.items else { return };
                for (i, item) in items.iter().enumerate() {
                    let old_item = node.map_keys.as_ref().and_then(|keys| {
                        let olds = old?.as_array()?;
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                    });
                    self.node(schema, item, old_item, &format!("{path}[{i}]"));
                }
            }
            _ => {}
        }
    }

    fn rule(&mut self, node: &Node, rule: &Rule, value: &Value, old: Option<&Value>, path: &str) {
        // Ratcheting (kube's CRDValidationRatcheting, on by default): a
        // value an update leaves as it was is not held to rules that do
        // not compare it with the old one.
        if !rule.transition() && old == Some(value) {
            return;
        }
        let old_self = match (rule.transition(), old, rule.optional_old_self) {
            (false, _, _) => None,
            (true, Some(old), false) => Some(to_cel(old)),
            (true, old, true) => Some(optional(old.map(to_cel))),
            // A transition rule without a value to compare runs only
            // when it asks to.
            (true, None, false) => return,
        };
        let mut activation = Activation::new().with("self", to_cel(value));
        if let Some(old_self) = old_self {
            activation.bind("oldSelf", old_self);
        }
        let outcome = rule.expression.evaluate(&activation, &mut self.budget);
        if let Some(cause) = self.cause(node, rule, path, outcome, &activation) {
            self.causes.push(cause);
        }
    }

    /// What an evaluation's outcome says is wrong, in kube's words.
    fn cause(
        &mut self,
        node: &Node,
        rule: &Rule,
        path: &str,
        outcome: Result<Cel, EvalError>,
        activation: &Activation,
    ) -> Option<Cause> {
        let at = shown(path);
        let why = match outcome {
            Ok(Cel::Bool(true)) => return None,
            Ok(Cel::Bool(false)) => {
                let detail = self.message(rule, activation);
                let field = match &rule.field_path {
                    Some(below) => shown(&join(path, below)),
                    None => at,
                };
                return Some(for_reason(field, &node.type_name, &detail, rule.reason));
            }
            Ok(other) => format!(
                "no such overload: the rule evaluated to {}, not a bool evaluating rule: {}",
                other.type_of(),
                rule.error_string()
            ),
            // kube runs no further rule past either limit.
            Err(EvalError::CallLimit) => {
                self.stopped = true;
                format!(
                    "'{CALL_LIMIT_EXCEEDED}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    rule.error_string()
                )
            }
            Err(stop @ EvalError::OutOfBudget) => {
                self.stopped = true;
                stop.to_string()
            }
            Err(EvalError::Failed(err)) if err.to_lowercase().starts_with("no such overload") => {
                format!("'{err}': call arguments did not match a supported operator, function or macro signature for rule: {}", rule.error_string())
            }
            Err(EvalError::Failed(err)) => {
                format!("{err} evaluating rule: {}", rule.error_string())
            }
        };
        Some(invalid(at, &node.type_name, &why))
    }

    /// The failure's detail: the messageExpression's string when it gives
    /// a usable one, else the message (or `failed rule: <rule>`).
    fn message(&mut self, rule: &Rule, activation: &Activation) -> String {
        let Some(expression) = &rule.message_expression else {
            return rule.message_or_default();
        };
        match expression.evaluate(activation, &mut self.budget) {
            Ok(Cel::String(text)) if !text.trim().is_empty() && !text.contains(['\n', '\r']) => {
                text.to_string()
            }
            _ => rule.message_or_default(),
        }
    }
}

fn optional(value: Option<Cel>) -> Cel {
    let optional = match value {
        Some(value) => OptionalValue::of(value),
        None => OptionalValue::none(),
    };
    Cel::Opaque(Arc::new(optional))
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

/// A path as kube's field.Path prints it: the root is `<nil>`.
fn shown(path: &str) -> String {
    match path {
        "" => "<nil>".to_string(),
        _ => path.to_string(),
    }
}

fn invalid(field: String, type_name: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {}: {why}", Value::from(type_name)),
    }
}

/// kube's fieldErrorForReason.
fn for_reason(field: String, type_name: &str, detail: &str, reason: Option<&'static str>) -> Cause {
    let (reason, message) = match reason {
        Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        Some("FieldValueRequired") => ("FieldValueRequired", format!("Required value: {detail}")),
        Some("FieldValueDuplicate") => (
            "FieldValueDuplicate",
            format!("Duplicate value: {}", Value::from(type_name)),
        ),
        _ => return invalid(field, type_name, detail),
    };
    Cause {
        reason,
        field,
        message,
    }
}
