//! JSON as CEL values, and the variables an evaluation reads.

use std::collections::HashMap;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
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

/// The variables of evaluations, converted to cel-rust's values once and
/// lent to every evaluation that reads them: converting an object costs
/// its size, and a request may evaluate many expressions over it.
#[derive(Default)]
pub struct Activation {
    values: HashMap<String, Box<dyn Val>>,
}

impl Activation {
    pub fn new() -> Activation {
        Activation::default()
    }

    /// Binds `name` to `value` (replacing what it was).
    pub fn bind(&mut self, name: &str, value: Cel) {
        // Data converts; only a cel-rust function value would not.
        if let Ok(value) = Box::<dyn Val>::try_from(value) {
            self.values.insert(name.to_string(), value);
        }
    }

    /// Binds `name` to `value` as CEL sees JSON.
    pub fn bind_json(&mut self, name: &str, value: &Value) {
        self.bind(name, to_cel(value));
    }

    /// These bindings and `name` bound to `value`.
    pub fn with(mut self, name: &str, value: Cel) -> Activation {
        self.bind(name, value);
        self
    }
}

impl VariableResolver for Activation {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let value = self.values.get(variable)?;
        Some(CowVal::Borrowed(value.as_ref()))
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
