//! Resource quantities as the integers a kubelet compares: CPU in
//! millicores, everything else in whole units (bytes, pods, devices).
//! Parsing is kube_quantity's; this module only fixes the rounding kube
//! uses (a fraction of a unit rounds up, as `Quantity.MilliValue` and
//! `Quantity.Value` do).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

/// A quantity that is not one kube would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
pub struct InvalidQuantity(pub String);

/// Rounding slack for the float kube_quantity hands back: `0.1 * 1000`
/// is 100.00000000000001, which must stay 100.
const SLACK: f64 = 1e-6;

fn parse(text: &str) -> Result<f64, InvalidQuantity> {
    let parsed = ParsedQuantity::try_from(text.trim()).map_err(|_| InvalidQuantity(text.into()))?;
    parsed
        .to_bytes_f64()
        .filter(|v| v.is_finite())
        .ok_or_else(|| InvalidQuantity(text.into()))
}

/// `text` in thousandths of a unit, rounded up (`100m` -> 100, `2` -> 2000).
pub fn parse_milli(text: &str) -> Result<i64, InvalidQuantity> {
    Ok((parse(text)? * 1000.0 - SLACK).ceil() as i64)
}

/// `text` in whole units, rounded up (`1Ki` -> 1024, `1500m` -> 2).
pub fn parse_units(text: &str) -> Result<i64, InvalidQuantity> {
    Ok((parse(text)? - SLACK).ceil() as i64)
}

/// The amount of `resource` in `quantity`, in the unit kube compares it
/// in: millicores for `cpu`, whole units for everything else.
pub fn amount(resource: &str, quantity: &Quantity) -> Result<i64, InvalidQuantity> {
    if resource == "cpu" {
        parse_milli(&quantity.0)
    } else {
        parse_units(&quantity.0)
    }
}

/// A quantity written back in kube's canonical form for that resource.
pub fn format(resource: &str, amount: i64) -> Quantity {
    if resource == "cpu" {
        format_milli(amount)
    } else {
        format_bytes(amount)
    }
}

/// Millicores as kube prints them: `2` for 2000, `250m` otherwise.
pub fn format_milli(milli: i64) -> Quantity {
    if milli % 1000 == 0 {
        Quantity((milli / 1000).to_string())
    } else {
        Quantity(format!("{milli}m"))
    }
}

/// Bytes in the largest binary suffix that divides them (`Ki`, `Mi`...).
pub fn format_bytes(bytes: i64) -> Quantity {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut value = bytes;
    let mut suffix = "";
    for next in SUFFIXES {
        if value == 0 || value % 1024 != 0 {
            break;
        }
        value /= 1024;
        suffix = next;
    }
    Quantity(format!("{value}{suffix}"))
}

/// A resource list (`requests`, `capacity`...) as amounts per resource.
pub type Amounts = BTreeMap<String, i64>;

/// Every entry of `list` as an amount; the first bad quantity is an error.
pub fn amounts(list: &BTreeMap<String, Quantity>) -> Result<Amounts, InvalidQuantity> {
    list.iter()
        .map(|(name, q)| Ok((name.clone(), amount(name, q)?)))
        .collect()
}

/// `amounts` written back as a resource list.
pub fn quantities(amounts: &Amounts) -> BTreeMap<String, Quantity> {
    amounts
        .iter()
        .map(|(name, v)| (name.clone(), format(name, *v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_counted_in_millicores_rounding_up() {
        assert_eq!(parse_milli("100m"), Ok(100));
        assert_eq!(parse_milli("0.1"), Ok(100));
        assert_eq!(parse_milli("2"), Ok(2000));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(parse_milli("0.0001"), Ok(1));
    }

    #[test]
    fn memory_is_counted_in_bytes() {
        assert_eq!(parse_units("1Ki"), Ok(1024));
        assert_eq!(parse_units("256Gi"), Ok(256 << 30));
        assert_eq!(parse_units("1k"), Ok(1000));
        assert_eq!(parse_units("128974848"), Ok(128_974_848));
        assert_eq!(parse_units("1500m"), Ok(2));
    }

    #[test]
    fn bad_quantities_are_refused() {
        assert!(parse_units("lots").is_err());
        assert!(parse_milli("").is_err());
        assert!(parse_units("1Qi").is_err());
    }

    #[test]
    fn amounts_print_in_kube_form() {
        assert_eq!(format_milli(32_000).0, "32");
        assert_eq!(format_milli(250).0, "250m");
        assert_eq!(format_bytes(256 << 30).0, "256Gi");
        assert_eq!(format_bytes((256 << 30) - (100 << 20)).0, "262044Mi");
        assert_eq!(format_bytes(1000).0, "1000");
        assert_eq!(format("pods", 110).0, "110");
    }
}
