//! CEL for admission policies, on the `cel` crate (cel-rust): an
//! expression is compiled once, refusing syntax errors and variables a
//! policy cannot see, and evaluated against a request's inputs (kube's
//! `object`, `oldObject`, `request`, `params`, `namespaceObject` and the
//! policy's own `variables`), converted from JSON.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::{Context, Env, Program, Value as Cel};
use serde_json::Value;

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

/// A compiled expression and its source.
pub struct Expression {
    pub source: String,
    program: Program,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

/// Compiles `source`, with kube's `compilation failed: ...` message when
/// it does not parse or names an undeclared variable.
pub fn compile(source: &str) -> Result<Expression, String> {
    let program =
        Program::compile(source).map_err(|errors| format!("compilation failed: {errors}"))?;
    let references = program.references();
    let mut undeclared: Vec<&str> = references
        .variables()
        .into_iter()
        .filter(|name| !DECLARED.contains(name) && !bound_in_macro(source, name))
        .collect();
    undeclared.sort();
    if let Some(name) = undeclared.first() {
        return Err(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{name}' (in container '')"
        ));
    }
    Ok(Expression {
        source: source.to_string(),
        program,
    })
}

/// Whether `name` is a comprehension's own variable (`all(c, ...)`),
/// which the parser reports as a reference like any other.
fn bound_in_macro(source: &str, name: &str) -> bool {
    let compact: String = source.chars().filter(|c| !c.is_whitespace()).collect();
    ["all(", "exists(", "exists_one(", "map(", "filter("]
        .iter()
        .any(|m| compact.contains(&format!("{m}{name},")))
}

/// What an expression sees. Absent inputs are CEL `null`.
#[derive(Debug, Default, Clone)]
pub struct Inputs {
    pub object: Value,
    pub old_object: Value,
    pub request: Value,
    pub params: Value,
    pub namespace_object: Value,
    /// The policy's variables evaluated so far, by name.
    pub variables: HashMap<String, Cel>,
}

/// Evaluates `expression` on `inputs`; an error's text is cel's.
pub fn evaluate(expression: &Expression, inputs: &Inputs) -> Result<Cel, String> {
    let mut context = Context::with_env(stdlib());
    for (name, value) in [
        ("object", &inputs.object),
        ("oldObject", &inputs.old_object),
        ("request", &inputs.request),
        ("params", &inputs.params),
        ("namespaceObject", &inputs.namespace_object),
    ] {
        context.add_variable_from_value(name, to_cel(value));
    }
    let variables: HashMap<String, Cel> = inputs.variables.clone();
    context.add_variable_from_value("variables", variables);
    expression
        .program
        .execute(&context)
        .map_err(|e| e.to_string())
}

/// One environment for every evaluation (building it is not free).
fn stdlib() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib())).clone()
}

/// JSON as CEL: integers stay `int` (as kube's unstructured objects do),
/// other numbers are `double`.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::from(s.as_str()),
        Value::Array(items) => Cel::from(items.iter().map(to_cel).collect::<Vec<_>>()),
        Value::Object(map) => {
            let map: HashMap<String, Cel> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(map)
        }
    }
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
        evaluate(&compile(source)?, &inputs)
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
