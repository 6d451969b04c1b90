//! Compiling a schema's rules into [`Rules`], and the causes kube gives a
//! CRD whose rules are wrong (a rule that does not compile, a bad
//! reason, fieldPath or message, `oldSelf` where nothing correlates).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps as Props, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ValidationRule,
};
use serde_json::Value;

use super::tree::{Node, Rule, Rules};
use crate::error::Cause;
use crate::expression::{compile, Expression};

/// The variables a rule may read.
const DECLARED: &[&str] = &["self", "oldSelf"];

const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

impl Rules {
    /// The rules of `schema`. Wrong ones are left out: the CRD's
    /// validation ([`check`]) refused them before the CRD was stored.
    pub fn of(schema: &Props) -> Rules {
        Rules {
            root: node(schema, "", None, &mut Vec::new()),
        }
    }
}

/// kube's causes for the rules of `schema`, which sits at `path` in the
/// CRD (`spec.validation.openAPIV3Schema`).
pub fn check(schema: &Props, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    node(schema, path, None, &mut causes);
    causes
}

/// The node of `schema` at `path` (None without rules at or below it).
/// `uncorrelatable` is the list above it, if any, whose items have no
/// old value to correlate with.
fn node(
    schema: &Props,
    path: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) -> Option<Node> {
    let rules = rules_of(schema, path, uncorrelatable, causes);
    let mut properties = BTreeMap::new();
    for (name, property) in schema.properties.iter().flatten() {
        let here = format!("{path}.properties[{name}]");
        if let Some(child) = node(property, &here, uncorrelatable, causes) {
            properties.insert(name.clone(), child);
        }
    }
    let additional = match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(extra)) => {
            let here = format!("{path}.additionalProperties");
            node(extra, &here, uncorrelatable, causes).map(Box::new)
        }
        _ => None,
    };
    let map_keys = (schema.x_kubernetes_list_type.as_deref() == Some("map")).then(|| {
        schema
            .x_kubernetes_list_map_keys
            .clone()
            .unwrap_or_default()
    });
    let items = match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => {
            let within = match map_keys {
                Some(_) => uncorrelatable,
                None => Some(uncorrelatable.unwrap_or(path)),
            };
            node(item, &format!("{path}.items"), within, causes).map(Box::new)
        }
        _ => None,
    };
    if rules.is_empty() && properties.is_empty() && additional.is_none() && items.is_none() {
        return None;
    }
    Some(Node {
        type_name: schema.type_.clone().unwrap_or_default(),
        rules,
        properties,
        additional,
        items,
        map_keys,
    })
}

fn rules_of(
    schema: &Props,
    path: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) -> Vec<Rule> {
    let listed = schema.x_kubernetes_validations.iter().flatten().enumerate();
    listed
        .filter_map(|(i, rule)| {
            let here = format!("{path}.x-kubernetes-validations[{i}]");
            let found = causes.len();
            let compiled = one(schema, rule, &here, uncorrelatable, causes);
            compiled.filter(|_| causes.len() == found)
        })
        .collect()
}

/// One rule checked and compiled as kube checks it; None when it has a
/// cause (recorded in `causes`).
fn one(
    schema: &Props,
    rule: &ValidationRule,
    here: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) -> Option<Rule> {
    if rule.rule.trim().is_empty() {
        causes.push(required(format!("{here}.rule"), "rule is not specified"));
        return None;
    }
    let message = message(rule, here, causes);
    let reason = match rule.reason.as_deref() {
        None => None,
        Some(reason) => REASONS.iter().copied().find(|r| *r == reason).or_else(|| {
            causes.push(unsupported(format!("{here}.reason"), reason));
            None
        }),
    };
    let field_path = rule.field_path.as_deref().filter(|p| !p.is_empty());
    let field_path = field_path.and_then(|p| match resolve(schema, p) {
        Ok(normalized) => Some(normalized),
        Err(why) => {
            causes.push(Cause::invalid(format!("{here}.fieldPath"), p, why));
            None
        }
    });
    let expression = compiled(rule, &rule.rule, format!("{here}.rule"), causes)?;
    let message_expression = match rule.message_expression.as_deref() {
        None | Some("") => None,
        Some(source) => Some(compiled(
            rule,
            source,
            format!("{here}.messageExpression"),
            causes,
        )?),
    };
    let optional_old_self = rule.optional_old_self.unwrap_or(false);
    check_old_self(rule, &expression, here, uncorrelatable, causes);
    Some(Rule {
        expression,
        message,
        message_expression,
        reason,
        field_path,
        optional_old_self,
    })
}

/// The rule's message, trimmed: on one line, and given when the rule
/// spans several.
fn message(rule: &ValidationRule, here: &str, causes: &mut Vec<Cause>) -> String {
    let message = rule
        .message
        .as_deref()
        .unwrap_or_default()
        .trim()
        .to_string();
    if message.contains(['\n', '\r']) {
        causes.push(Cause::invalid(
            format!("{here}.message"),
            &message,
            "message must not contain line breaks",
        ));
    } else if message.is_empty() && rule.rule.contains(['\n', '\r']) {
        causes.push(required(
            format!("{here}.message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    message
}

/// `oldSelf` only where an old value can be found (not inside a list
/// without keys), and `optionalOldSelf` only when the rule reads it.
fn check_old_self(
    rule: &ValidationRule,
    expression: &Expression,
    here: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) {
    if expression.reads("oldSelf") {
        if let Some(list) = uncorrelatable {
            let why = format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
            );
            causes.push(Cause::invalid(format!("{here}.rule"), &rule.rule, why));
        }
    } else if rule.optional_old_self.unwrap_or(false) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: format!("{here}.optionalOldSelf"),
            message: "Invalid value: true: may not be set if rule does not use oldSelf".into(),
        });
    }
}

/// `source` compiled, or kube's cause naming the whole rule as Go's `%#v`
/// shows it.
fn compiled(
    rule: &ValidationRule,
    source: &str,
    field: String,
    causes: &mut Vec<Cause>,
) -> Option<Expression> {
    compile(source, DECLARED)
        .map_err(|why| {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field,
                message: format!("Invalid value: {}: {why}", go_rule(rule)),
            })
        })
        .ok()
}

/// A rule as Go prints an `apiextensions.ValidationRule` with `%#v`
/// (pointers, whose addresses mean nothing here, show what they point at).
fn go_rule(rule: &ValidationRule) -> String {
    let quoted = |s: Option<&str>| Value::from(s.unwrap_or_default()).to_string();
    let reason = match &rule.reason {
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
        Some(r) => format!(
            "(*apiextensions.FieldValueErrorReason)({})",
            quoted(Some(r))
        ),
    };
    let old_self = match rule.optional_old_self {
        None => "(*bool)(nil)".to_string(),
        Some(b) => format!("(*bool)({b})"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{old_self}}}",
        quoted(Some(&rule.rule)),
        quoted(rule.message.as_deref()),
        quoted(rule.message_expression.as_deref()),
        quoted(rule.field_path.as_deref()),
    )
}

/// `fieldPath` (`.spec.name`, `.labels['a.b']`) checked against the
/// schema, as the dotted path a cause names.
fn resolve(schema: &Props, field_path: &str) -> Result<String, String> {
    field_schema(schema, field_path)
        .map(|(path, _)| path)
        .map_err(|why| format!("fieldPath must be a valid path: {why}"))
}

/// The schema a relative path (`.spec.name`, `.labels['a.b']`) names in
/// `schema`, and the path dotted.
pub fn field_schema<'a>(
    schema: &'a Props,
    field_path: &str,
) -> Result<(String, &'a Props), String> {
    let steps = parse_field_path(field_path).ok_or("expected a sequence of .name or ['name']")?;
    let mut at = schema;
    for step in &steps {
        let next = match (&at.properties, &at.additional_properties) {
            (Some(properties), _) if properties.contains_key(step) => properties.get(step),
            (_, Some(JSONSchemaPropsOrBool::Schema(extra))) => Some(extra.as_ref()),
            _ => None,
        };
        at = next.ok_or("does not refer to a valid field")?;
    }
    Ok((steps.join("."), at))
}

fn parse_field_path(path: &str) -> Option<Vec<String>> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            steps.push(after[..end].to_string());
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            steps.push(after[..end].to_string());
            rest = &after[end..];
        } else {
            return None;
        }
    }
    (!steps.is_empty()).then_some(steps)
}

fn required(field: String, why: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field,
        message: format!("Required value: {why}"),
    }
}

fn unsupported(field: String, reason: &str) -> Cause {
    let listed: Vec<String> = REASONS.iter().map(|r| format!("{r:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported",
        field,
        message: format!(
            "Unsupported value: {reason:?}: supported values: {}",
            listed.join(", ")
        ),
    }
}
