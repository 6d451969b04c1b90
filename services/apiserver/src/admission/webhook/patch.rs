//! A mutating webhook's JSONPatch (RFC 6902) applied to the object being
//! admitted, with the `json-patch` crate. The patch applies whole or not
//! at all, and may not turn the object into another kind.

use serde_json::Value;

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PatchError {
    #[error("unable to decode the JSONPatch: {0}")]
    Decode(String),
    #[error("unable to apply the JSONPatch: {0}")]
    Apply(String),
    #[error("the JSONPatch changed {0}, which a webhook may not change")]
    Retyped(&'static str),
}

/// Whether `patch` has no operations (None when it is not a JSONPatch).
pub fn is_empty(patch: &[u8]) -> Option<bool> {
    let patch: json_patch::Patch = serde_json::from_slice(patch).ok()?;
    Some(patch.0.is_empty())
}

/// Applies `patch` to `object`; whether the object changed.
pub fn apply(object: &mut Value, patch: &[u8]) -> Result<bool, PatchError> {
    let patch: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| PatchError::Decode(e.to_string()))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| PatchError::Apply(e.to_string()))?;
    for field in ["apiVersion", "kind"] {
        if patched[field] != object[field] {
            return Err(PatchError::Retyped(field));
        }
    }
    let changed = patched != *object;
    *object = patched;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}}})
    }

    #[test]
    fn a_patch_changes_the_object_or_nothing() {
        let mut object = pod();
        let add = br#"[{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]"#;
        assert_eq!(apply(&mut object, add), Ok(true));
        assert_eq!(object["metadata"]["labels"]["mutated"], "yes");
        let same = br#"[{"op": "replace", "path": "/metadata/labels/app", "value": "web"}]"#;
        assert_eq!(apply(&mut object, same), Ok(false));
        let before = object.clone();
        // The first operation applies, the second fails: neither stays.
        let half = br#"[{"op": "add", "path": "/metadata/labels/x", "value": "1"},
                        {"op": "remove", "path": "/spec/missing"}]"#;
        assert!(matches!(
            apply(&mut object, half),
            Err(PatchError::Apply(_))
        ));
        assert_eq!(object, before);
        assert!(matches!(
            apply(&mut object, b"{}"),
            Err(PatchError::Decode(_))
        ));
        let retype = br#"[{"op": "replace", "path": "/kind", "value": "Secret"}]"#;
        assert_eq!(apply(&mut object, retype), Err(PatchError::Retyped("kind")));
        assert_eq!(object, before);
    }
}
