//! Rewrites a compiled expression to charge its meter (`meter.rs`) where its
//! work grows, keeping what it means and the shapes cel-rust evaluates
//! fast (`map`/`filter` append in place, `all`/`exists` fold):
//! - each loop turn charges the nodes of its body: through the loop
//!   condition (`all`, `exists`: an error there ends the loop at once),
//!   or, where the condition is constant (`map`, `filter`, `exists_one`),
//!   through the step, with what it appends;
//! - each value passed to a function or operator, or placed in a list or
//!   map literal, charges its traversal (what copying, comparing or
//!   scanning it costs), and so does each range a loop walks (each
//!   element is copied for its turn);
//! - `authorizer...check()` charges kube's 350,000 before it asks;
//! - `replace` and `join`, which can make far more than they are given,
//!   run as the meter's own functions, which charge their result first.
//!
//! The nodes outside every loop body are charged once, before anything
//! runs ([`Instrumented::fixed`]).

use cel::common::ast::{
    operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, ListExpr,
    LiteralValue, MapEntryExpr, MapExpr, SelectExpr, StructExpr, StructFieldExpr,
};
use cel::common::types::{CelBool, CelInt};

use super::cost::AUTHORIZATION_CHECK;
use super::environment::{NAMESPACES, TYPE_NAMES};
use super::meter::{CHARGE, JOIN, REPLACE};

/// Calls that do constant work whatever their operands hold, or steer
/// evaluation without touching values.
const CONSTANT: &[&str] = &[
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::NOT_STRICTLY_FALSE,
    operators::CONDITIONAL,
    operators::INDEX,
    operators::OPT_INDEX,
    operators::OPT_SELECT,
    "size",
];

/// Tenths of cost per byte of a string `split` may turn into one value
/// per byte.
const PER_BYTE: i64 = 10;

pub struct Instrumented {
    pub expr: IdedExpr,
    /// What the nodes outside every loop body cost.
    pub fixed: u64,
}

pub fn instrument(root: &IdedExpr) -> Instrumented {
    let mut rewriter = Rewriter {
        next_id: max_id(root) + 1,
        accumulators: Vec::new(),
    };
    Instrumented {
        expr: rewriter.expr(root),
        fixed: nodes(root),
    }
}

/// Nodes of `e`, not counting the bodies of the loops in it (they charge
/// per turn).
fn nodes(e: &IdedExpr) -> u64 {
    1 + match &e.expr {
        Expr::Call(call) => {
            call.target.as_deref().map_or(0, nodes) + call.args.iter().map(nodes).sum::<u64>()
        }
        Expr::Comprehension(c) => nodes(&c.iter_range) + nodes(&c.accu_init) + nodes(&c.result),
        Expr::List(list) => list.elements.iter().map(nodes).sum(),
        Expr::Map(map) => map.entries.iter().map(entry_nodes).sum(),
        Expr::Struct(s) => s.entries.iter().map(entry_nodes).sum(),
        Expr::Select(select) => nodes(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
    }
}

fn entry_nodes(entry: &IdedEntryExpr) -> u64 {
    match &entry.expr {
        EntryExpr::StructField(field) => nodes(&field.value),
        EntryExpr::MapEntry(entry) => nodes(&entry.key) + nodes(&entry.value),
    }
}

fn max_id(e: &IdedExpr) -> u64 {
    let children: Vec<&IdedExpr> = match &e.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::StructField(field) => vec![&field.value],
                EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
            })
            .collect(),
        Expr::Select(select) => vec![&*select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    children.into_iter().map(max_id).fold(e.id, u64::max)
}

/// Whether `name` names a type or a function namespace, not a value.
fn names_no_value(name: &str) -> bool {
    TYPE_NAMES.contains(&name) || NAMESPACES.contains(&name)
}

/// `a.b.c` made of names only: cel-rust resolves it as one qualified name,
/// which must stay as written.
fn is_qualified_name(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Ident(_) => true,
        Expr::Select(select) => !select.test && is_qualified_name(&select.operand),
        _ => false,
    }
}

struct Rewriter {
    next_id: u64,
    /// The accumulators of the loops around: cel-rust's fast `map` and
    /// fold shapes must see them bare.
    accumulators: Vec<String>,
}

impl Rewriter {
    fn node(&mut self, expr: Expr) -> IdedExpr {
        self.next_id += 1;
        IdedExpr {
            id: self.next_id,
            expr,
        }
    }

    fn literal(&mut self, value: LiteralValue) -> IdedExpr {
        self.node(Expr::Literal(value))
    }

    fn call(&mut self, func_name: &str, args: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::Call(CallExpr {
            func_name: func_name.to_string(),
            target: None,
            args,
        }))
    }

    /// `@cost(n, x[, k])`: `x`, once `n` and its traversal are charged.
    fn charged(&mut self, fixed: u64, value: IdedExpr, per_byte: Option<i64>) -> IdedExpr {
        let fixed = self.literal(LiteralValue::Int(CelInt::from(fixed as i64)));
        let mut args = vec![fixed, value];
        if let Some(k) = per_byte {
            args.push(self.literal(LiteralValue::Int(CelInt::from(k))));
        }
        self.call(CHARGE, args)
    }

    /// `@cost(n) ? then : otherwise`: `n` charged before `then` runs.
    fn after_charging(&mut self, cost: u64, then: IdedExpr, otherwise: LiteralValue) -> IdedExpr {
        let fixed = self.literal(LiteralValue::Int(CelInt::from(cost as i64)));
        let charge = self.call(CHARGE, vec![fixed]);
        let otherwise = self.literal(otherwise);
        self.call(operators::CONDITIONAL, vec![charge, then, otherwise])
    }

    /// Whether `e` is a value worth measuring where it is used.
    fn measured(&self, e: &IdedExpr) -> bool {
        match &e.expr {
            Expr::Literal(_) => false,
            Expr::Ident(name) => !names_no_value(name) && !self.accumulators.contains(name),
            _ => true,
        }
    }

    /// `e` rewritten, and measured where it is used.
    fn operand(&mut self, e: &IdedExpr) -> IdedExpr {
        let rewritten = self.expr(e);
        match self.measured(e) {
            true => self.charged(0, rewritten, None),
            false => rewritten,
        }
    }

    fn expr(&mut self, e: &IdedExpr) -> IdedExpr {
        let expr = match &e.expr {
            Expr::Call(call) => return self.call_expr(e.id, call),
            Expr::Comprehension(c) => Expr::Comprehension(Box::new(self.comprehension(c))),
            Expr::List(list) => Expr::List(ListExpr {
                elements: list.elements.iter().map(|x| self.operand(x)).collect(),
                optional_indices: list.optional_indices.clone(),
            }),
            Expr::Map(map) => Expr::Map(MapExpr {
                entries: map.entries.iter().map(|x| self.entry(x)).collect(),
            }),
            Expr::Struct(s) => Expr::Struct(StructExpr {
                type_name: s.type_name.clone(),
                entries: s.entries.iter().map(|x| self.entry(x)).collect(),
            }),
            Expr::Select(select) if !is_qualified_name(&select.operand) => {
                Expr::Select(SelectExpr {
                    operand: Box::new(self.expr(&select.operand)),
                    field: select.field.clone(),
                    test: select.test,
                })
            }
            other => other.clone(),
        };
        IdedExpr { id: e.id, expr }
    }

    fn entry(&mut self, entry: &IdedEntryExpr) -> IdedEntryExpr {
        let expr = match &entry.expr {
            EntryExpr::StructField(field) => EntryExpr::StructField(StructFieldExpr {
                field: field.field.clone(),
                value: self.operand(&field.value),
                optional: field.optional,
            }),
            EntryExpr::MapEntry(e) => EntryExpr::MapEntry(MapEntryExpr {
                key: self.operand(&e.key),
                value: self.operand(&e.value),
                optional: e.optional,
            }),
        };
        IdedEntryExpr { id: entry.id, expr }
    }

    fn call_expr(&mut self, id: u64, call: &CallExpr) -> IdedExpr {
        let name = call.func_name.as_str();
        let target = call.target.as_deref();
        let plain = |r: &mut Self| CallExpr {
            func_name: call.func_name.clone(),
            target: target.map(|t| Box::new(r.expr(t))),
            args: call.args.iter().map(|a| r.expr(a)).collect(),
        };
        let appends_to_accumulator = name == operators::ADD
            && matches!(call.args.first().map(|a| &a.expr),
                Some(Expr::Ident(n)) if self.accumulators.contains(n));
        let rewritten = match (name, target) {
            _ if CONSTANT.contains(&name) || appends_to_accumulator => plain(self),
            ("check", Some(_)) => {
                let check = IdedExpr {
                    id,
                    expr: Expr::Call(plain(self)),
                };
                return self.after_charging(AUTHORIZATION_CHECK, check, LiteralValue::Null);
            }
            ("replace" | "join", Some(t)) => {
                let mut args = vec![self.expr(t)];
                args.extend(call.args.iter().map(|a| self.expr(a)));
                let meters = if name == "replace" { REPLACE } else { JOIN };
                CallExpr {
                    func_name: meters.to_string(),
                    target: None,
                    args,
                }
            }
            (_, Some(t)) if is_qualified_name(t) && self.names_a_namespace(t) => plain(self),
            _ => {
                let target = target.map(|t| {
                    let rewritten = self.expr(t);
                    let per_byte = (name == "split").then_some(PER_BYTE);
                    Box::new(match self.measured(t) {
                        true => self.charged(0, rewritten, per_byte),
                        false => rewritten,
                    })
                });
                CallExpr {
                    func_name: call.func_name.clone(),
                    target,
                    args: call.args.iter().map(|a| self.operand(a)).collect(),
                }
            }
        };
        IdedExpr {
            id,
            expr: Expr::Call(rewritten),
        }
    }

    fn names_a_namespace(&self, target: &IdedExpr) -> bool {
        let mut root = target;
        while let Expr::Select(select) = &root.expr {
            root = &select.operand;
        }
        matches!(&root.expr, Expr::Ident(name) if names_no_value(name))
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> ComprehensionExpr {
        let per_turn = nodes(&c.loop_cond) + nodes(&c.loop_step);
        let iter_range = self.operand(&c.iter_range);
        let accu_init = self.expr(&c.accu_init);
        self.accumulators.push(c.accu_var.clone());
        let (loop_cond, loop_step) = match &c.loop_cond.expr {
            Expr::Literal(_) => (c.loop_cond.clone(), self.charged_step(c, per_turn)),
            _ => {
                let cond = self.expr(&c.loop_cond);
                let cond = self.after_charging(
                    per_turn,
                    cond,
                    LiteralValue::Boolean(CelBool::from(false)),
                );
                (cond, self.expr(&c.loop_step))
            }
        };
        let result = self.expr(&c.result);
        self.accumulators.pop();
        ComprehensionExpr {
            iter_range,
            iter_var: c.iter_var.clone(),
            iter_var2: c.iter_var2.clone(),
            accu_var: c.accu_var.clone(),
            accu_init,
            loop_cond,
            loop_step,
            result,
        }
    }

    /// A loop step that charges a turn: inside what `map` and `filter`
    /// append (or their guard), so cel-rust still appends in place;
    /// around any other step.
    fn charged_step(&mut self, c: &ComprehensionExpr, per_turn: u64) -> IdedExpr {
        let step = &c.loop_step;
        let Some((guard, item)) = append_shape(c) else {
            let step = self.expr(step);
            return self.after_charging(per_turn, step, LiteralValue::Null);
        };
        let item = self.expr(item);
        let guard = guard.map(|guard| {
            let guard = self.expr(guard);
            self.charged(per_turn, guard, None)
        });
        let item_cost = if guard.is_some() { 0 } else { per_turn };
        let item = self.charged(item_cost, item, None);
        let accumulator = self.node(Expr::Ident(c.accu_var.clone()));
        let list = self.node(Expr::List(ListExpr {
            elements: vec![item],
            optional_indices: Vec::new(),
        }));
        let appended = IdedExpr {
            id: step.id,
            expr: Expr::Call(CallExpr {
                func_name: operators::ADD.to_string(),
                target: None,
                args: vec![accumulator, list],
            }),
        };
        match guard {
            None => appended,
            Some(guard) => {
                let keep = self.node(Expr::Ident(c.accu_var.clone()));
                self.call(operators::CONDITIONAL, vec![guard, appended, keep])
            }
        }
    }
}

/// cel-rust's in-place append: `accu + [item]`, or `guard ? accu + [item]
/// : accu`, with the accumulator as the result and a constant condition.
fn append_shape(c: &ComprehensionExpr) -> Option<(Option<&IdedExpr>, &IdedExpr)> {
    let accu = c.accu_var.as_str();
    if !is_ident(&c.result, accu) {
        return None;
    }
    let Expr::Call(call) = &c.loop_step.expr else {
        return None;
    };
    match call.args.as_slice() {
        [guard, step, otherwise]
            if call.func_name == operators::CONDITIONAL && is_ident(otherwise, accu) =>
        {
            Some((Some(guard), appended_item(step, accu)?))
        }
        _ => Some((None, appended_item(&c.loop_step, accu)?)),
    }
}

fn is_ident(e: &IdedExpr, name: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == name)
}

/// The item of `accu + [item]`.
fn appended_item<'e>(e: &'e IdedExpr, accu: &str) -> Option<&'e IdedExpr> {
    let Expr::Call(call) = &e.expr else {
        return None;
    };
    match call.args.as_slice() {
        [first, list] if call.func_name == operators::ADD && is_ident(first, accu) => {
            match &list.expr {
                Expr::List(l) if l.elements.len() == 1 && l.optional_indices.is_empty() => {
                    l.elements.first()
                }
                _ => None,
            }
        }
        _ => None,
    }
}
