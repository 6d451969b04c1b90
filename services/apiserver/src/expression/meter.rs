//! The meter an evaluation runs against: what it has spent and how much
//! it may, and the functions a rewritten expression (`instrument.rs`) calls into it. cel-rust
//! counts nothing as it evaluates, so the expression is rewritten to call
//! these at the points where its work grows: each turn of a loop, each
//! value passed to a function or operator or copied into a list or map
//! (by its size: copying, comparing and scanning are linear in it), each
//! authorization check. Once the limit is passed every charge fails, so
//! the evaluation stops at the next one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cel::common::types::{CelBytes, CelList, CelMap, CelMapKey, CelOptional, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext};

/// The functions' names: `@` keeps them out of what CEL source can call.
pub const CHARGE: &str = "@cost";
pub const REPLACE: &str = "@cost_replace";
pub const JOIN: &str = "@cost_join";

/// kube's (cel-go's) cost of traversing a string: a tenth per byte.
const TENTHS_PER_BYTE: u64 = 1;

/// What one evaluation has spent, against its limit.
#[derive(Debug)]
pub struct Meter {
    spent: AtomicU64,
    limit: u64,
    passed: AtomicBool,
}

impl Meter {
    pub fn new(limit: u64) -> Arc<Meter> {
        Arc::new(Meter {
            spent: AtomicU64::new(0),
            limit,
            passed: AtomicBool::new(false),
        })
    }

    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Whether a charge went past the limit (the evaluation's outcome,
    /// whatever CEL made of the error, is then the limit's).
    pub fn passed(&self) -> bool {
        self.passed.load(Ordering::Relaxed)
    }

    pub fn charge(&self, cost: u64) -> Result<(), ExecutionError> {
        let before = self.spent.fetch_add(cost, Ordering::Relaxed);
        if self.passed() || before.saturating_add(cost) > self.limit {
            self.passed.store(true, Ordering::Relaxed);
            return Err(ExecutionError::function_error(
                CHARGE,
                super::cost::CALL_LIMIT_EXCEEDED,
            ));
        }
        Ok(())
    }
}

/// The signature cel-rust keeps its functions in.
type Function = Box<
    dyn for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
        + Send
        + Sync,
>;

/// Adds the metering functions, charging `meter`, to an evaluation's
/// context.
pub fn install(context: &mut Context, meter: &Arc<Meter>) {
    let charge: Function = {
        let meter = meter.clone();
        Box::new(move |ftx| charge(&meter, ftx))
    };
    let replace: Function = {
        let meter = meter.clone();
        Box::new(move |ftx| replace(&meter, ftx))
    };
    let join: Function = {
        let meter = meter.clone();
        Box::new(move |ftx| join(&meter, ftx))
    };
    let added = [
        context.add_function(CHARGE, charge),
        context.add_function(REPLACE, replace),
        context.add_function(JOIN, join),
    ];
    debug_assert!(added.iter().all(Result::is_ok), "{added:?}");
}

/// `@cost(n)`: charges `n`, is true. `@cost(n, x)`: charges `n` and the
/// cost of traversing `x`, is `x` (not copied). `@cost(n, x, k)`: the
/// same at `k` tenths per byte of string (one per byte where every byte
/// may become a value of its own, as `split('')` makes it).
fn charge<'c, 'v>(
    meter: &Meter,
    ftx: &mut FunctionContext<'c, 'v>,
) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let fixed = ftx
        .args
        .first()
        .and_then(|n| n.downcast_ref::<cel::common::types::CelInt>())
        .map_or(1, |n| (*n.inner()).max(0) as u64);
    let tenths = ftx
        .args
        .get(2)
        .and_then(|k| k.downcast_ref::<cel::common::types::CelInt>())
        .map_or(TENTHS_PER_BYTE, |k| (*k.inner()).max(0) as u64);
    let measured = ftx.args.get(1).map_or(0, |x| traversal(x.as_ref(), tenths));
    meter.charge(fixed.saturating_add(measured))?;
    match ftx.args.len() {
        1 => Ok(CowVal::owned(cel::common::types::CelBool::from(true))),
        _ => Ok(std::mem::replace(
            &mut ftx.args[1],
            CowVal::owned(cel::common::types::CelNull),
        )),
    }
}

/// What traversing `value` costs as cel-go counts it: a tenth per byte of
/// string (`tenths` tenths), one per element of a list or map; walked
/// with a stack of its own.
pub fn traversal(value: &dyn Val, tenths: u64) -> u64 {
    let mut bytes = 0u64;
    let mut elements = 0u64;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        if let Some(text) = value.downcast_ref::<CelString>() {
            bytes += text.inner().len() as u64;
        } else if let Some(data) = value.downcast_ref::<CelBytes>() {
            bytes += data.inner().len() as u64;
        } else if let Some(list) = value.downcast_ref::<CelList>() {
            elements += list.inner().len() as u64;
            pending.extend(list.inner().iter().map(|item| item.as_ref()));
        } else if let Some(map) = value.downcast_ref::<CelMap>() {
            elements += map.inner().len() as u64;
            for (key, item) in map.inner() {
                if let CelMapKey::String(key) = key {
                    bytes += key.inner().len() as u64;
                }
                pending.push(item.as_ref());
            }
        } else if let Some(inner) = value.downcast_ref::<CelOptional>().and_then(|o| o.option()) {
            pending.push(inner);
        }
    }
    elements.saturating_add(bytes.saturating_mul(tenths) / 10)
}

fn string_arg<'a>(ftx: &'a FunctionContext, at: usize) -> Result<&'a str, ExecutionError> {
    ftx.args
        .get(at)
        .and_then(|v| v.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(|| ftx.error("expected a string argument"))
}

/// `s.replace(old, new[, n])`, charged for the longest result it can
/// make before it makes it: an empty `old` puts `new` between every two
/// characters, so a short string and a long `new` multiply.
fn replace<'c, 'v>(
    meter: &Meter,
    ftx: &mut FunctionContext<'c, 'v>,
) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let (text, old, new) = (
        string_arg(ftx, 0)?,
        string_arg(ftx, 1)?,
        string_arg(ftx, 2)?,
    );
    let limit = match ftx.args.get(3) {
        None => None,
        Some(n) => {
            let n = n
                .downcast_ref::<cel::common::types::CelInt>()
                .ok_or_else(|| ftx.error("expected an int count"))?;
            usize::try_from(*n.inner()).ok()
        }
    };
    let most = text.len() / old.len().max(1) + 1;
    let count = limit.map_or(most, |n| n.min(most)) as u64;
    let longest = (text.len() as u64).saturating_add(count.saturating_mul(new.len() as u64));
    meter.charge(longest.saturating_mul(2 * TENTHS_PER_BYTE) / 10 + 1)?;
    let replaced = match limit {
        Some(n) => text.replacen(old, new, n),
        None => text.replace(old, new),
    };
    Ok(CowVal::owned(CelString::from(replaced)))
}

/// `list.join([separator])`, charged for its result before it is made:
/// a long separator between many short strings multiplies.
fn join<'c, 'v>(
    meter: &Meter,
    ftx: &mut FunctionContext<'c, 'v>,
) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let separator = match ftx.args.len() {
        1 => "",
        _ => string_arg(ftx, 1)?,
    };
    let list = ftx
        .args
        .first()
        .and_then(|l| l.downcast_ref::<CelList>())
        .ok_or_else(|| ftx.error("join needs a list of strings"))?;
    let mut parts = Vec::with_capacity(list.inner().len());
    for item in list.inner() {
        let part = item
            .downcast_ref::<CelString>()
            .ok_or_else(|| ftx.error("join needs a list of strings"))?;
        parts.push(part.inner());
    }
    let text: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let separators = (parts.len().saturating_sub(1) as u64).saturating_mul(separator.len() as u64);
    let longest = text.saturating_add(separators);
    meter.charge(longest.saturating_mul(2 * TENTHS_PER_BYTE) / 10 + 1)?;
    Ok(CowVal::owned(CelString::from(parts.join(separator))))
}
