//! Compiling an expression: parsing it in the shared environment,
//! checking it names no variable its user does not declare (cel-rust has
//! no type checker, so this is the part of kube's check we can make), and
//! rewriting it to charge its meter as it runs ([`super::instrument`]).
//! Evaluating it: against a [`super::meter::Meter`] whose limit is kube's
//! per-call limit or what is left of the request's [`Budget`].

use std::collections::BTreeSet;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr};
use cel::{Context, IdedExpr, Value as Cel};

use super::cost::{Budget, EvalError};
use super::environment::{self, NAMESPACES, TYPE_NAMES};
use super::instrument::instrument;
use super::kube_lists;
use super::meter::{self, Meter};
use super::values::Activation;

/// A compiled expression: its source, and the syntax tree rewritten to
/// charge its meter.
pub struct Expression {
    pub source: String,
    metered: IdedExpr,
    /// What the nodes outside its loops cost, charged before it runs.
    fixed: u64,
    /// The declared variables it reads.
    pub variables: BTreeSet<String>,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

/// Compiles `source`, with kube's `compilation failed: ...` message when
/// it does not parse or reads a variable that `declared` does not list.
pub fn compile(source: &str, declared: &[&str]) -> Result<Expression, String> {
    let program = environment::shared()
        .compile(source)
        .map_err(|errors| format!("compilation failed: {errors}"))?;
    let mut shape = Shape::default();
    shape.walk(program.expression(), &mut Vec::new());
    let undeclared = shape
        .free
        .iter()
        .find(|name| !declared.contains(&name.as_str()));
    if let Some(name) = undeclared {
        return Err(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{name}' (in container '')"
        ));
    }
    let instrumented = instrument(program.expression());
    Ok(Expression {
        source: source.to_string(),
        metered: instrumented.expr,
        fixed: instrumented.fixed,
        variables: shape.free,
    })
}

/// cel evaluates by recursion, a level per nested call, and requests run
/// on the HTTP workers' 2 MiB stacks: a webhook's match condition of
/// sixteen nested `map`s overflowed one in a debug build and aborted the
/// server. An evaluation with less than this left runs on a stack of
/// `EVALUATION_STACK` of its own (mapped for the call, touched as used).
const RED_ZONE: usize = 4 << 20;
const EVALUATION_STACK: usize = 16 << 20;

impl Expression {
    /// Evaluates the expression over `activation`'s variables, spending
    /// from `budget`; an error's text is cel's, or kube's for a limit.
    pub fn evaluate(&self, activation: &Activation, budget: &mut Budget) -> Result<Cel, EvalError> {
        self.evaluate_with(activation, budget, |_| {})
    }

    /// [`Expression::evaluate`] with functions of the caller's own
    /// library added to the context (admission's `authorizer`).
    pub fn evaluate_with(
        &self,
        activation: &Activation,
        budget: &mut Budget,
        library: impl FnOnce(&mut Context),
    ) -> Result<Cel, EvalError> {
        let (limit, stop) = budget.next_limit();
        let meter = Meter::new(limit);
        let outcome = stacker::maybe_grow(RED_ZONE, EVALUATION_STACK, || {
            self.run(activation, &meter, library)
        });
        budget.spend(meter.spent().min(limit));
        match meter.passed() {
            true => Err(stop),
            false => outcome.map_err(EvalError::Failed),
        }
    }

    fn run(
        &self,
        activation: &Activation,
        meter: &Arc<Meter>,
        library: impl FnOnce(&mut Context),
    ) -> Result<Cel, String> {
        meter.charge(self.fixed).map_err(|e| e.to_string())?;
        let mut context = Context::with_env(environment::shared());
        kube_lists::install(&mut context);
        meter::install(&mut context, meter);
        library(&mut context);
        context.set_variable_resolver(activation);
        Cel::resolve(&self.metered, &context).map_err(|e| e.to_string())
    }

    /// Whether the expression reads `variable`.
    pub fn reads(&self, variable: &str) -> bool {
        self.variables.contains(variable)
    }
}

/// What a walk of the syntax tree finds.
#[derive(Default)]
struct Shape {
    /// Identifiers read that no comprehension binds.
    free: BTreeSet<String>,
}

impl Shape {
    fn walk(&mut self, node: &IdedExpr, bound: &mut Vec<String>) {
        match &node.expr {
            Expr::Ident(name) => {
                if !bound.contains(name) && !TYPE_NAMES.contains(&name.as_str()) {
                    self.free.insert(name.clone());
                }
            }
            Expr::Select(select) => self.walk(&select.operand, bound),
            Expr::Call(call) => {
                match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(space),
                        ..
                    }) if NAMESPACES.contains(&space.as_str()) && !bound.contains(space) => {}
                    Some(target) => self.walk(target, bound),
                    None => {}
                }
                for arg in &call.args {
                    self.walk(arg, bound);
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element, bound);
                }
            }
            Expr::Map(map) => self.entries(&map.entries, bound),
            Expr::Struct(s) => self.entries(&s.entries, bound),
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range, bound);
                self.walk(&c.accu_init, bound);
                let before = bound.len();
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                bound.push(c.accu_var.clone());
                for inner in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(inner, bound);
                }
                bound.truncate(before);
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entries(&mut self, entries: &[cel::common::ast::IdedEntryExpr], bound: &mut Vec<String>) {
        for entry in entries {
            match &entry.expr {
                EntryExpr::StructField(field) => self.walk(&field.value, bound),
                EntryExpr::MapEntry(entry) => {
                    self.walk(&entry.key, bound);
                    self.walk(&entry.value, bound);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(source: &str, bindings: Vec<(&str, Cel)>) -> Result<Cel, EvalError> {
        let declared: Vec<&str> = bindings.iter().map(|(n, _)| *n).collect();
        let expression = compile(source, &declared).map_err(EvalError::Failed)?;
        let activation = bindings
            .into_iter()
            .fold(Activation::new(), |a, (name, value)| a.with(name, value));
        expression.evaluate(&activation, &mut Budget::default())
    }

    #[test]
    fn comprehension_variables_are_bound_and_others_declared() {
        let declared = ["self", "oldSelf"];
        let e = compile(
            "self.items.all(i, i.size() > 0 && self.x.exists(y, y == i))",
            &declared,
        )
        .unwrap();
        assert!(e.reads("self") && !e.reads("oldSelf"));
        assert!(compile("oldSelf.optMap(o, o) == optional.none()", &declared).is_ok());
        assert!(compile("type(self) == string", &declared).is_ok());
        let unknown = compile("self.a == other", &declared).unwrap_err();
        assert_eq!(
            unknown,
            "compilation failed: ERROR: <input>: undeclared reference to 'other' (in container '')"
        );
        let leaked = compile("self.all(i, true) && i", &declared).unwrap_err();
        assert!(leaked.contains("'i'"), "{leaked}");
    }

    #[test]
    fn syntax_errors_say_where() {
        let broken = compile("self.replicas <=", &["self"]).unwrap_err();
        assert!(
            broken.starts_with("compilation failed: ERROR: <input>:1:"),
            "{broken}"
        );
    }

    #[test]
    fn strings_extension_functions_evaluate() {
        let source = "self.lowerAscii().startsWith('ab') && self.lowerAscii().indexOf('c') == 2";
        assert_eq!(
            run(source, vec![("self", Cel::from("ABC"))]),
            Ok(Cel::Bool(true))
        );
    }

    /// kube's list library (`kube_lists.rs`), as the compiler installs it.
    #[test]
    fn lists_are_summed_ordered_and_bounded() {
        let evaluate = |source| run(source, vec![]).map_err(|e| e.to_string());
        assert_eq!(evaluate("[1, 2, 2, 5].isSorted()"), Ok(Cel::Bool(true)));
        assert_eq!(evaluate("['b', 'a'].isSorted()"), Ok(Cel::Bool(false)));
        assert_eq!(
            evaluate("[1, 2, 3].sum() == 6 && [].sum() == 0"),
            Ok(Cel::Bool(true))
        );
        assert_eq!(evaluate("[3, 1, 2].min()"), Ok(Cel::Int(1)));
        assert_eq!(evaluate("['a', 'c', 'b'].max()"), Ok(Cel::from("c")));
        assert!(evaluate("[].min()")
            .unwrap_err()
            .contains("must not be empty"));
        assert!(evaluate("[1, 'a'].isSorted()").is_err());
    }
}
