//! A ValidatingAdmissionPolicy with every CEL expression compiled: what
//! the plugin evaluates (compiled once per policy generation) and what
//! the policy's strategy checks at create and update (an expression that
//! does not compile is a 422 naming its field).

use serde_json::Value;

use super::expressions::{compile, Expression};

/// One `spec.validations[]` entry.
#[derive(Debug)]
pub struct Validation {
    pub expression: Expression,
    pub message: String,
    pub message_expression: Option<Expression>,
    /// kube's reason for a denial: Invalid (the default), Forbidden,
    /// Unauthorized or RequestEntityTooLarge.
    pub reason: &'static str,
}

/// A named expression: a match condition, a variable, an audit annotation.
#[derive(Debug)]
pub struct Named {
    pub name: String,
    pub expression: Expression,
}

#[derive(Debug)]
pub struct Compiled {
    pub name: String,
    /// `failurePolicy: Fail` (the default): an error refuses.
    pub fail_closed: bool,
    pub constraints: Value,
    pub match_conditions: Vec<Named>,
    pub variables: Vec<Named>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<Named>,
}

/// An expression that does not compile: its field, source and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadExpression {
    pub field: String,
    pub source: String,
    pub why: String,
}

const REASONS: &[&str] = &[
    "Invalid",
    "Forbidden",
    "Unauthorized",
    "RequestEntityTooLarge",
];

impl Compiled {
    /// Compiles every expression of `policy`; all that fail are reported.
    pub fn from_policy(policy: &Value) -> Result<Compiled, Vec<BadExpression>> {
        let spec = &policy["spec"];
        let mut bad = Vec::new();
        let mut one = |field: String, source: &str| match compile(source) {
            Ok(expression) => Some(expression),
            Err(why) => {
                bad.push(BadExpression {
                    field,
                    source: source.to_string(),
                    why,
                });
                None
            }
        };
        let mut named = |list: &str, name_field: &str, expr_field: &str| -> Vec<Named> {
            let items = spec[list].as_array().into_iter().flatten().enumerate();
            items
                .filter_map(|(i, item)| {
                    let source = item[expr_field].as_str().unwrap_or_default();
                    let expression = one(format!("spec.{list}[{i}].{expr_field}"), source)?;
                    let name = item[name_field].as_str().unwrap_or_default().to_string();
                    Some(Named { name, expression })
                })
                .collect()
        };
        let match_conditions = named("matchConditions", "name", "expression");
        let variables = named("variables", "name", "expression");
        let audit_annotations = named("auditAnnotations", "key", "valueExpression");
        let validations = validations(spec, &mut one);
        if !bad.is_empty() {
            return Err(bad);
        }
        Ok(Compiled {
            name: crate::object::meta::name(policy).to_string(),
            fail_closed: spec["failurePolicy"].as_str() != Some("Ignore"),
            constraints: spec["matchConstraints"].clone(),
            match_conditions,
            variables,
            validations,
            audit_annotations,
        })
    }
}

fn validations(
    spec: &Value,
    one: &mut impl FnMut(String, &str) -> Option<Expression>,
) -> Vec<Validation> {
    let items = spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate();
    let mut compiled = Vec::new();
    for (i, item) in items {
        let text = |field: &str| item[field].as_str().unwrap_or_default();
        let field = |name: &str| format!("spec.validations[{i}].{name}");
        let expression = one(field("expression"), text("expression"));
        let message_expression = match text("messageExpression") {
            "" => None,
            source => one(field("messageExpression"), source),
        };
        let reason = REASONS
            .iter()
            .copied()
            .find(|r| *r == text("reason"))
            .unwrap_or("Invalid");
        if let Some(expression) = expression {
            compiled.push(Validation {
                expression,
                message: text("message").to_string(),
                message_expression,
                reason,
            });
        }
    }
    compiled
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_expression_is_compiled_and_every_failure_named() {
        let policy = json!({"metadata": {"name": "p"}, "spec": {
            "failurePolicy": "Ignore",
            "matchConditions": [{"name": "not-system", "expression": "request.namespace != 'kube-system'"}],
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
            "validations": [{"expression": "variables.replicas <= 5", "reason": "Forbidden",
                             "messageExpression": "'too many: ' + string(variables.replicas)"}],
            "auditAnnotations": [{"key": "replicas", "valueExpression": "string(object.spec.replicas)"}]}});
        let compiled = Compiled::from_policy(&policy).unwrap();
        assert_eq!(compiled.name, "p");
        assert!(!compiled.fail_closed);
        assert_eq!(compiled.validations[0].reason, "Forbidden");
        assert_eq!(compiled.match_conditions[0].name, "not-system");
        let broken = json!({"spec": {"validations": [{"expression": "object.spec.replicas <="},
            {"expression": "true", "messageExpression": "nope.x"}]}});
        let bad = Compiled::from_policy(&broken).unwrap_err();
        let fields: Vec<&str> = bad.iter().map(|b| b.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.validations[0].expression",
                "spec.validations[1].messageExpression"
            ]
        );
        assert!(
            bad[0].why.starts_with("compilation failed: "),
            "{}",
            bad[0].why
        );
    }
}
