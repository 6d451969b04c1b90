//! kube's limits on what CEL may cost, one mechanism wherever CEL runs
//! (CRD validation rules, ValidatingAdmissionPolicy expressions, webhook
//! match conditions): each evaluation runs against a meter (`meter.rs`)
//! that counts its work as it goes and stops it past kube's per-call
//! limit, and what it spent comes off the [`Budget`] of the request (per
//! custom resource, per policy binding, per webhook's match conditions),
//! which stops evaluating once it is spent.
//!
//! The units are kube's (cel-go's runtime cost): about one per node
//! evaluated, one per turn of a loop per node in its body, a tenth per
//! byte of string a function traverses, one per element of a list or map
//! it copies or compares, 350,000 per authorization check.

/// kube's limit on one evaluation (celconfig.PerCallLimit).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// kube's budget for all the rules of one custom resource, or the
/// expressions of one policy binding (celconfig.RuntimeCELCostBudget).
pub const REQUEST_BUDGET: u64 = 10_000_000;

/// kube's budget for one webhook's (or one binding's) match conditions
/// (celconfig.RuntimeCELCostBudgetMatchConditions).
pub const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;

/// What one `authorizer...check()` costs: kube's, two per expression.
pub const AUTHORIZATION_CHECK: u64 = 350_000;

/// cel-go's text when an evaluation passes the per-call limit.
pub const CALL_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// kube's text when the request's budget runs out.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Why an evaluation stopped or failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// CEL's own error (a missing field, no such overload...).
    #[error("{0}")]
    Failed(String),
    /// The evaluation passed [`PER_CALL_LIMIT`].
    #[error("{CALL_LIMIT_EXCEEDED}")]
    CallLimit,
    /// The evaluation passed what was left of the request's budget.
    #[error("{OUT_OF_BUDGET}")]
    OutOfBudget,
}

impl EvalError {
    /// Whether no further expression of the request may run: kube's
    /// filters go on after an expression passes the per-call limit (CRD
    /// rules do not) and stop once the budget is spent.
    pub fn stops_the_rest(&self) -> bool {
        matches!(self, EvalError::OutOfBudget)
    }
}

/// What a request has left to spend on evaluations.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    left: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::of(REQUEST_BUDGET)
    }
}

impl Budget {
    pub fn of(total: u64) -> Budget {
        Budget { left: total }
    }

    pub fn left(&self) -> u64 {
        self.left
    }

    /// The most the next evaluation may spend, and the error it stops
    /// with there: the per-call limit, or what is left if less.
    pub(super) fn next_limit(&self) -> (u64, EvalError) {
        match self.left < PER_CALL_LIMIT {
            true => (self.left, EvalError::OutOfBudget),
            false => (PER_CALL_LIMIT, EvalError::CallLimit),
        }
    }

    pub(super) fn spend(&mut self, cost: u64) {
        self.left = self.left.saturating_sub(cost);
    }
}
