//! Part of kube's CEL lists library that cel-rust lacks and CRD rules
//! use: `isSorted()`, `sum()`, `min()`, `max()` on lists. (kube's list
//! `indexOf`/`lastIndexOf` would clash with the strings extension's
//! functions of the same names, which cel-rust declares for every target
//! type, so they are not offered.)

use std::cmp::Ordering;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::ResolveResult;
use cel::{Context, ExecutionError, Value};

/// Adds the functions to an evaluation's context.
pub fn install(context: &mut Context) {
    let added = [
        context.add_function("isSorted", is_sorted),
        context.add_function("sum", sum),
        context.add_function("min", min),
        context.add_function("max", max),
    ];
    debug_assert!(added.iter().all(Result::is_ok), "{added:?}");
}

fn order(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b).ok_or_else(|| {
        ExecutionError::function_error(function, "list elements must be of one comparable type")
    })
}

fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool, ExecutionError> {
    for pair in list.windows(2) {
        if order("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return Ok(false);
        }
    }
    Ok(true)
}

fn sum(This(list): This<Arc<Vec<Value>>>) -> ResolveResult {
    let mut items = list.iter().cloned();
    let Some(first) = items.next() else {
        return Ok(Value::Int(0));
    };
    items.try_fold(first, |total, item| total + item)
}

fn extreme(function: &str, list: &[Value], keep: Ordering) -> ResolveResult {
    let mut items = list.iter();
    let mut best = items.next().ok_or_else(|| {
        ExecutionError::function_error(
            function,
            format!("{function}(list) argument must not be empty"),
        )
    })?;
    for item in items {
        if order(function, item, best)? == keep {
            best = item;
        }
    }
    Ok(best.clone())
}

fn min(This(list): This<Arc<Vec<Value>>>) -> ResolveResult {
    extreme("min", &list, Ordering::Less)
}

fn max(This(list): This<Arc<Vec<Value>>>) -> ResolveResult {
    extreme("max", &list, Ordering::Greater)
}
