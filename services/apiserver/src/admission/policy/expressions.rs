//! CEL for admission policies, on the shared [`crate::expression`]: an
//! expression is compiled once, refusing syntax errors and variables a
//! policy cannot see, and evaluated against a request's inputs (kube's
//! `object`, `oldObject`, `request`, `params`, `namespaceObject` and the
//! policy's own `variables`), converted from JSON once per evaluation of
//! a policy and shared by its expressions, each of which spends from the
//! budget kube gives them.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value as Cel;
use serde_json::Value;

use super::authz;
use crate::auth::Authorizer;
use crate::expression::{self, Activation};
pub use crate::expression::{Budget, EvalError, Expression};

/// The variables kube declares for ValidatingAdmissionPolicy expressions.
const DECLARED: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// Compiles `source`, with kube's `compilation failed: ...` message when
/// it does not parse or names an undeclared variable.
pub fn compile(source: &str) -> Result<Expression, String> {
    expression::compile(source, DECLARED)
}

/// What an expression sees. Absent inputs are CEL `null`.
#[derive(Clone)]
pub struct Inputs {
    pub object: Value,
    pub old_object: Value,
    pub request: Value,
    pub params: Value,
    pub namespace_object: Value,
    /// The policy's variables evaluated so far, by name.
    pub variables: HashMap<String, Cel>,
    /// The `authorizer` variable ([`authz::variable`]), null if unset.
    pub authorizer: Cel,
    /// What its `check()` asks.
    pub checker: Option<Arc<dyn Authorizer>>,
}

impl Default for Inputs {
    fn default() -> Inputs {
        Inputs {
            object: Value::Null,
            old_object: Value::Null,
            request: Value::Null,
            params: Value::Null,
            namespace_object: Value::Null,
            variables: HashMap::new(),
            authorizer: Cel::Null,
            checker: None,
        }
    }
}

impl Inputs {
    /// The inputs as CEL variables, converted once for every expression
    /// evaluated over them.
    pub fn activation(&self) -> Activation {
        let mut activation = Activation::new();
        for (name, value) in [
            ("object", &self.object),
            ("oldObject", &self.old_object),
            ("request", &self.request),
            ("params", &self.params),
            ("namespaceObject", &self.namespace_object),
        ] {
            activation.bind_json(name, value);
        }
        activation.bind("authorizer", self.authorizer.clone());
        activation.bind("variables", Cel::from(self.variables.clone()));
        activation
    }

    /// Adds a variable's value, for the expressions evaluated after it.
    pub fn set_variable(&mut self, activation: &mut Activation, name: &str, value: Cel) {
        self.variables.insert(name.to_string(), value);
        activation.bind("variables", Cel::from(self.variables.clone()));
    }
}

/// Evaluates `expression` over `activation` (made by
/// [`Inputs::activation`]), spending from `budget`.
pub fn evaluate(
    expression: &Expression,
    inputs: &Inputs,
    activation: &Activation,
    budget: &mut Budget,
) -> Result<Cel, EvalError> {
    let checker = inputs.checker.clone();
    expression.evaluate_with(activation, budget, |context| {
        authz::install(context, checker)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(source: &str, object: Value) -> Result<Cel, String> {
        let inputs = Inputs {
            object,
            ..Inputs::default()
        };
        let expression = compile(source)?;
        let activation = inputs.activation();
        evaluate(&expression, &inputs, &activation, &mut Budget::default())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn expressions_read_the_object() {
        let deployment = json!({"spec": {"replicas": 6, "template": {"spec": {"containers": [
            {"name": "a", "image": "nginx:1"}, {"name": "b", "image": "busybox"}]}}}});
        assert_eq!(
            run("object.spec.replicas <= 5", deployment.clone()),
            Ok(Cel::Bool(false))
        );
        assert_eq!(
            run(
                "object.spec.replicas > 5 && has(object.spec.template)",
                deployment.clone()
            ),
            Ok(Cel::Bool(true))
        );
        let images = "object.spec.template.spec.containers.all(c, c.image.contains(':'))";
        assert_eq!(run(images, deployment.clone()), Ok(Cel::Bool(false)));
        let names = "object.spec.template.spec.containers.map(c, c.name).size() == 2";
        assert_eq!(run(names, deployment.clone()), Ok(Cel::Bool(true)));
        assert_eq!(
            run("oldObject == null", deployment.clone()),
            Ok(Cel::Bool(true))
        );
        assert_eq!(
            run("'replicas: ' + string(object.spec.replicas)", deployment),
            Ok(Cel::from("replicas: 6"))
        );
    }

    #[test]
    fn syntax_errors_and_undeclared_names_do_not_compile() {
        let broken = compile("object.spec.replicas <=").unwrap_err();
        assert!(
            broken.starts_with("compilation failed: ERROR: <input>:1:"),
            "{broken}"
        );
        let unknown = compile("foo.bar == 1").unwrap_err();
        assert!(
            unknown.contains("undeclared reference to 'foo'"),
            "{unknown}"
        );
        assert!(compile("request.operation == 'CREATE' && variables.x").is_ok());
    }

    #[test]
    fn a_missing_field_is_an_evaluation_error() {
        let error = run("object.spec.replicas > 1", json!({"spec": {}})).unwrap_err();
        assert!(error.contains("replicas"), "{error}");
    }
}
