//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`) read as exact
//! integers, rounded up as kube's `Quantity.Value()` and `MilliValue()` do.
//!
//! Hand-written because the quantity crates at hand either truncate fractions
//! before scaling (`1.5Gi` read as 1 Gi) or go through `f64` (`100m` read as
//! 100.00000000000001 millis): the scheduler compares sums of requests with
//! allocatable, so an off-by-one milli matters.

use thiserror::Error;

/// A quantity that is not in Kubernetes' grammar.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
pub struct QuantityError(pub String);

/// The exact value of a quantity as `numerator / denominator`.
struct Ratio {
    numerator: i128,
    denominator: i128,
}

const MAX_DIGITS: usize = 30;

/// `value` rounded up to an integer (bytes, pods, extended resources).
pub fn parse_value(text: &str) -> Result<i64, QuantityError> {
    let ratio = parse_ratio(text)?;
    Ok(ceil_div(ratio.numerator, ratio.denominator))
}

/// `value * 1000` rounded up (millicores).
pub fn parse_milli_value(text: &str) -> Result<i64, QuantityError> {
    let ratio = parse_ratio(text)?;
    Ok(ceil_div(
        ratio.numerator.saturating_mul(1000),
        ratio.denominator,
    ))
}

fn ceil_div(numerator: i128, denominator: i128) -> i64 {
    let quotient = numerator.div_euclid(denominator);
    let rounded = if numerator.rem_euclid(denominator) == 0 {
        quotient
    } else {
        quotient + 1
    };
    rounded.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn parse_ratio(text: &str) -> Result<Ratio, QuantityError> {
    let bad = || QuantityError(text.to_string());
    let trimmed = text.trim();
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (mut numerator, fraction_digits) = parse_decimal(number).ok_or_else(bad)?;
    let mut denominator = 10i128.pow(fraction_digits as u32);
    let (multiply, divide) = suffix_factor(suffix).ok_or_else(bad)?;
    numerator = numerator.checked_mul(multiply).ok_or_else(bad)?;
    denominator = denominator.checked_mul(divide).ok_or_else(bad)?;
    if negative {
        numerator = -numerator;
    }
    Ok(Ratio {
        numerator,
        denominator,
    })
}

/// Digits with at most one '.', as (all digits as an integer, digits after the point).
fn parse_decimal(number: &str) -> Option<(i128, usize)> {
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    if whole.is_empty() && fraction.is_empty() || whole.len() + fraction.len() > MAX_DIGITS {
        return None;
    }
    if fraction.contains('.') {
        return None;
    }
    let mut value: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        value = value * 10 + i128::from(digit - b'0');
    }
    Some((value, fraction.len()))
}

/// The suffix as (multiplier, divisor).
fn suffix_factor(suffix: &str) -> Option<(i128, i128)> {
    let binary = |power: u32| Some((1i128 << (10 * power), 1));
    let decimal = |exponent: i32| {
        if exponent >= 0 {
            Some((10i128.checked_pow(exponent as u32)?, 1))
        } else {
            Some((1, 10i128.checked_pow(exponent.unsigned_abs())?))
        }
    };
    match suffix {
        "" => decimal(0),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let exponent: i32 = exponent.parse().ok()?;
            if exponent.abs() > 30 {
                return None;
            }
            decimal(exponent)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_values_are_exact_and_round_up() {
        let cases = [
            ("100m", 100),
            ("1", 1000),
            ("0.1", 100),
            ("1.5", 1500),
            ("2500u", 3),
            ("1n", 1),
            ("32", 32_000),
            ("1e3", 1_000_000),
            ("0", 0),
        ];
        for (text, want) in cases {
            assert_eq!(parse_milli_value(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn values_scale_binary_and_decimal_suffixes() {
        let cases = [
            ("1Ki", 1024),
            ("1.5Gi", 1536 * 1024 * 1024),
            ("256Gi", 256 << 30),
            ("200M", 200_000_000),
            ("1k", 1000),
            ("110", 110),
            ("1500m", 2),
            (
                "12E",
                12_000_000_000_000_000_000i128.min(i64::MAX as i128) as i64,
            ),
            ("-1", -1),
        ];
        for (text, want) in cases {
            assert_eq!(parse_value(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn malformed_quantities_are_refused() {
        for text in ["", "abc", "1.2.3", "1Zi", "1e", "1e99", "..", "1 Gi x"] {
            assert!(parse_value(text).is_err(), "{text}");
        }
    }
}
