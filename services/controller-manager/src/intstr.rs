//! kube's `GetScaledValueFromIntOrPercent`: an int is itself, `N%` is N
//! percent of a total, rounded up or down as the caller says (maxSurge
//! rounds up, maxUnavailable down).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The value of `value` against `total`; an error names what is wrong.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(text) => {
            let percent: i64 = text
                .strip_suffix('%')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {text:?}"))?;
            let product = percent * i64::from(total);
            let value = match round_up {
                true => (product + 99).div_euclid(100),
                false => product.div_euclid(100),
            };
            Ok(value as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_as_asked() {
        let p = |s: &str| IntOrString::String(s.into());
        assert_eq!(scaled_value(&p("25%"), 10, true), Ok(3));
        assert_eq!(scaled_value(&p("25%"), 10, false), Ok(2));
        assert_eq!(scaled_value(&p("100%"), 7, false), Ok(7));
        assert_eq!(scaled_value(&p("0%"), 7, true), Ok(0));
        assert_eq!(scaled_value(&IntOrString::Int(4), 7, true), Ok(4));
        assert!(scaled_value(&p("oops"), 7, true).is_err());
        assert!(scaled_value(&p("5"), 7, true).is_err());
    }
}
