//! Quantities as the autoscaler compares them: in thousandths of their
//! unit, read by the metrics client and the replica calculator alike.

/// A quantity in thousandths of its unit, rounded up as kube's
/// `MilliValue` rounds (the margin absorbs binary floating point).
pub fn milli_value(quantity: &str) -> Option<i64> {
    let value = capstan_quota::quantity::parse(quantity)?;
    Some((value * 1000.0 - 1e-6).ceil() as i64)
}
