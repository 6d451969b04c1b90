//! A bound on what an evaluation costs, checked before it runs.
//!
//! kube estimates every rule's cost from the schema when a CRD is written
//! and meters evaluations as they run; cel-rust does neither. What this
//! server does instead: before evaluating, it bounds the work from the
//! size of the input and the shape of the expression (each node once per
//! element of every comprehension around it: `nodes * size^depth`) and
//! does not start an evaluation whose bound passes kube's per-call limit,
//! nor one that would take a request past kube's per-request budget. The
//! bound over-estimates (a comprehension rarely ranges over the whole
//! input), so a rule that nests comprehensions is refused on large
//! objects where kube might still run it; a runaway rule never runs.

use serde_json::Value;

use super::Expression;

/// kube's limit on one evaluation (celconfig.PerCallLimit).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// kube's budget for all the rules of one request
/// (celconfig.RuntimeCELCostBudget).
pub const REQUEST_BUDGET: u64 = 10_000_000;

/// The error text kube's evaluator reports when the limit is passed.
pub const EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// How many values `value` holds: itself and everything inside it.
pub fn size(value: &Value) -> u64 {
    match value {
        Value::Array(items) => 1 + items.iter().map(size).sum::<u64>(),
        Value::Object(map) => 1 + map.values().map(size).sum::<u64>(),
        _ => 1,
    }
}

/// The most work evaluating `expression` over inputs holding `size`
/// values can do.
pub fn bound(expression: &Expression, size: u64) -> u64 {
    let per_element = size
        .max(1)
        .checked_pow(expression.depth)
        .unwrap_or(u64::MAX);
    expression.nodes.saturating_mul(per_element)
}

/// What a request has left to spend on evaluations.
#[derive(Debug)]
pub struct Budget(u64);

impl Default for Budget {
    fn default() -> Self {
        Budget(REQUEST_BUDGET)
    }
}

impl Budget {
    /// Takes what evaluating `expression` over `size` values may cost;
    /// false (and nothing taken) when that passes the per-call limit or
    /// what is left.
    pub fn take(&mut self, expression: &Expression, size: u64) -> bool {
        let cost = bound(expression, size);
        if cost > PER_CALL_LIMIT || cost > self.0 {
            return false;
        }
        self.0 -= cost;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expression::compile;
    use serde_json::json;

    #[test]
    fn nested_comprehensions_over_large_inputs_are_refused() {
        let flat = compile("self.all(x, x > 0)", &["self"]).unwrap();
        let nested = compile("self.all(x, self.all(y, x != y || true))", &["self"]).unwrap();
        let small = json!([1, 2, 3]);
        let large = Value::from((0..5_000).collect::<Vec<i64>>());
        assert_eq!(size(&small), 4);
        let mut budget = Budget::default();
        assert!(budget.take(&flat, size(&large)));
        assert!(budget.take(&nested, size(&small)));
        assert!(!budget.take(&nested, size(&large)));
    }

    #[test]
    fn the_request_budget_runs_out() {
        let flat = compile("self.all(x, x > 0)", &["self"]).unwrap();
        let large = size(&Value::from((0..50_000).collect::<Vec<i64>>()));
        let mut budget = Budget::default();
        let runs = (0..100).take_while(|_| budget.take(&flat, large)).count();
        assert!(runs > 0 && runs < 100, "{runs}");
    }
}
