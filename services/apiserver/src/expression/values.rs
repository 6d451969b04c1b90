//! JSON as CEL values.

use std::collections::HashMap;

use cel::Value as Cel;
use serde_json::Value;

/// JSON as CEL: integers stay `int` (as kube's unstructured objects do),
/// other numbers are `double`.
pub fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::from(s.as_str()),
        Value::Array(items) => Cel::from(items.iter().map(to_cel).collect::<Vec<_>>()),
        Value::Object(map) => {
            let map: HashMap<String, Cel> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_keep_their_kind() {
        assert_eq!(to_cel(&json!(3)), Cel::Int(3));
        assert_eq!(to_cel(&json!(u64::MAX)), Cel::UInt(u64::MAX));
        assert_eq!(to_cel(&json!(1.5)), Cel::Float(1.5));
        assert_eq!(to_cel(&json!(null)), Cel::Null);
    }
}
