//! Compiling an expression: parsing it in the shared environment and
//! checking it names no variable its user does not declare (cel-rust has
//! no type checker, so this is the part of kube's check we can make).

use std::collections::BTreeSet;

use cel::common::ast::{EntryExpr, Expr};
use cel::{Context, IdedExpr, Program, Value as Cel};

use super::environment;

/// Identifiers that name types (`type(x) == string`), not variables.
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional_type",
];

/// Calls whose work grows with their inputs (a list's length, a
/// string's): for [`super::cost`] each counts as one more level of
/// comprehension where it stands.
const LINEAR: &[&str] = &[
    "@in",
    "sum",
    "min",
    "max",
    "isSorted",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "indexOf",
    "lastIndexOf",
    "replace",
    "split",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
];

/// Function namespaces a call may be qualified with (`optional.of(x)`).
const NAMESPACES: &[&str] = &["optional"];

/// A compiled expression, its source, and its shape for [`super::cost`].
pub struct Expression {
    pub source: String,
    program: Program,
    /// How many nodes the expression has.
    pub nodes: u64,
    /// How deeply its comprehensions (`all`, `exists`, `map`, ...) nest,
    /// a linear call (`x in list`, `sum()`, `matches()`) counting as one.
    pub depth: u32,
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
    shape.walk(program.expression(), &mut Vec::new(), 0);
    let undeclared = shape
        .free
        .iter()
        .find(|name| !declared.contains(&name.as_str()));
    if let Some(name) = undeclared {
        return Err(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{name}' (in container '')"
        ));
    }
    Ok(Expression {
        source: source.to_string(),
        program,
        nodes: shape.nodes,
        depth: shape.depth,
        variables: shape.free,
    })
}

impl Expression {
    /// Evaluates the expression with `bindings` as its variables; an
    /// error's text is cel's.
    pub fn evaluate(&self, bindings: Vec<(&str, Cel)>) -> Result<Cel, String> {
        self.evaluate_with(bindings, |_| {})
    }

    /// [`Expression::evaluate`] with functions of the caller's own
    /// library added to the context (admission's `authorizer`).
    pub fn evaluate_with(
        &self,
        bindings: Vec<(&str, Cel)>,
        library: impl FnOnce(&mut Context),
    ) -> Result<Cel, String> {
        let mut context = Context::with_env(environment::shared());
        super::kube_lists::install(&mut context);
        library(&mut context);
        for (name, value) in bindings {
            context.add_variable_from_value(name, value);
        }
        self.program.execute(&context).map_err(|e| e.to_string())
    }

    /// Whether the expression reads `variable`.
    pub fn reads(&self, variable: &str) -> bool {
        self.variables.contains(variable)
    }
}

/// What a walk of the syntax tree finds.
#[derive(Default)]
struct Shape {
    nodes: u64,
    depth: u32,
    /// Identifiers read that no comprehension binds.
    free: BTreeSet<String>,
}

impl Shape {
    fn walk(&mut self, node: &IdedExpr, bound: &mut Vec<String>, depth: u32) {
        self.nodes += 1;
        self.depth = self.depth.max(depth);
        match &node.expr {
            Expr::Ident(name) => {
                if !bound.contains(name) && !TYPE_NAMES.contains(&name.as_str()) {
                    self.free.insert(name.clone());
                }
            }
            Expr::Select(select) => self.walk(&select.operand, bound, depth),
            Expr::Call(call) => {
                if LINEAR.contains(&call.func_name.as_str()) {
                    self.depth = self.depth.max(depth + 1);
                }
                match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(space),
                        ..
                    }) if NAMESPACES.contains(&space.as_str()) && !bound.contains(space) => {}
                    Some(target) => self.walk(target, bound, depth),
                    None => {}
                }
                for arg in &call.args {
                    self.walk(arg, bound, depth);
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.walk(element, bound, depth);
                }
            }
            Expr::Map(map) => self.entries(&map.entries, bound, depth),
            Expr::Struct(s) => self.entries(&s.entries, bound, depth),
            Expr::Comprehension(c) => {
                self.walk(&c.iter_range, bound, depth);
                self.walk(&c.accu_init, bound, depth);
                let before = bound.len();
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                bound.push(c.accu_var.clone());
                for inner in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(inner, bound, depth + 1);
                }
                bound.truncate(before);
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn entries(
        &mut self,
        entries: &[cel::common::ast::IdedEntryExpr],
        bound: &mut Vec<String>,
        depth: u32,
    ) {
        for entry in entries {
            match &entry.expr {
                EntryExpr::StructField(field) => self.walk(&field.value, bound, depth),
                EntryExpr::MapEntry(entry) => {
                    self.walk(&entry.key, bound, depth);
                    self.walk(&entry.value, bound, depth);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comprehension_variables_are_bound_and_others_declared() {
        let declared = ["self", "oldSelf"];
        let e = compile(
            "self.items.all(i, i.size() > 0 && self.x.exists(y, y == i))",
            &declared,
        )
        .unwrap();
        assert_eq!(e.depth, 2);
        let linear = compile("self.items.all(i, i in self.other)", &declared).unwrap();
        assert_eq!(linear.depth, 2, "`in` walks a list inside the loop");
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
        let e = compile(
            "self.lowerAscii().startsWith('ab') && self.lowerAscii().indexOf('c') == 2",
            &["self"],
        )
        .unwrap();
        assert_eq!(
            e.evaluate(vec![("self", Cel::from("ABC"))]),
            Ok(Cel::Bool(true))
        );
    }
}
