//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`, `10M`) as
//! numbers, for comparisons such as "a claim may only grow". Exactness
//! beyond f64 is not needed for those.

/// The value of `text` in base units, or None when it is not a quantity.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => 10f64.powi(exponent[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn suffixes_and_exponents() {
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1.5k"), Some(1500.0));
        assert_eq!(parse("2e3"), Some(2000.0));
        assert_eq!(parse("3"), Some(3.0));
        assert!(parse("1Gib").is_none());
        assert!(parse("lots").is_none());
        assert!(parse("1Gi").unwrap() > parse("1G").unwrap());
    }
}
