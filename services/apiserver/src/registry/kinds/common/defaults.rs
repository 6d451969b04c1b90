//! Defaulting: fields a kind fills when the client leaves them out.

use serde_json::Value;

/// Sets `obj[path...] = value` when absent, creating objects on the way.
pub fn default_at(obj: &mut Value, path: &[&str], value: Value) {
    let mut cursor = obj;
    for key in &path[..path.len() - 1] {
        if !cursor[*key].is_object() {
            cursor[*key] = serde_json::json!({});
        }
        cursor = &mut cursor[*key];
    }
    let last = path[path.len() - 1];
    if cursor.get(last).is_none_or(|v| v.is_null()) {
        cursor[last] = value;
    }
}
