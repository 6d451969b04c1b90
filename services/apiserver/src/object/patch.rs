//! The PATCH content types and how each one changes an object.

use serde_json::Value;

use super::strategic;
use crate::error::ApiError;

/// RFC 6902 allows arbitrarily long patches; Kubernetes caps them.
const MAX_JSON_PATCH_OPS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

const STRATEGIC: &str = "application/strategic-merge-patch+json";

impl PatchType {
    /// The patch type a request's `Content-Type` names; `strategic` says
    /// whether the resource type has the field metadata a strategic merge
    /// patch needs (custom resources do not, and refuse it as kube does).
    pub fn from_content_type(content_type: &str, strategic: bool) -> Result<PatchType, ApiError> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            STRATEGIC if strategic => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            _ => {
                let mut accepted = vec![
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ];
                accepted.extend(strategic.then_some(STRATEGIC));
                Err(ApiError::UnsupportedMediaType(accepted.join(", ")))
            }
        }
    }
}

/// Applies `patch` (already parsed as JSON) to `original`.
pub fn apply(kind: PatchType, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchType::Json => json_patch_apply(original, patch),
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest(
                    "merge patch must be a JSON object".into(),
                ));
            }
            let mut doc = original.clone();
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest(
                    "strategic merge patch must be a JSON object".into(),
                ));
            }
            Ok(strategic::merge(original, patch))
        }
        // Server-side apply needs the field owners, which the registry's
        // patch flow brings (see `object::apply`); it never comes here.
        PatchType::Apply => Err(ApiError::Internal(
            "an apply patch is merged with object::apply".into(),
        )),
    }
}

fn json_patch_apply(original: &Value, patch: &Value) -> Result<Value, ApiError> {
    if patch
        .as_array()
        .is_some_and(|ops| ops.len() > MAX_JSON_PATCH_OPS)
    {
        return Err(ApiError::TooLarge(MAX_JSON_PATCH_OPS));
    }
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
    let mut doc = original.clone();
    for (index, op) in ops.iter().enumerate() {
        if tests_missing_for_null(&doc, op) {
            continue;
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = index;
            ApiError::invalid_patch(e.to_string())
        })?;
    }
    Ok(doc)
}

/// kube's JSON patch library takes a missing member to be null, so a
/// `test` for null passes where nothing is (kube-rs's finalizer helper
/// adds the first finalizer after testing `/metadata/finalizers` is
/// null); the json-patch crate fails that test.
fn tests_missing_for_null(doc: &Value, op: &json_patch::PatchOperation) -> bool {
    match op {
        json_patch::PatchOperation::Test(test) => {
            test.value.is_null() && doc.pointer(test.path.as_str()).is_none()
        }
        _ => false,
    }
}

impl ApiError {
    /// A patch that parsed but cannot be applied (a failing `test`, a
    /// missing path): 422, as kube-apiserver answers.
    pub fn invalid_patch(message: String) -> ApiError {
        let cause = crate::error::Cause {
            reason: "FieldValueInvalid",
            field: "patch".into(),
            message,
        };
        ApiError::invalid(Default::default(), "Patch", vec![cause])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_deletes_with_null() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let out = apply(
            PatchType::Merge,
            &obj,
            &json!({"metadata": {"labels": {"a": null}}}),
        )
        .unwrap();
        assert_eq!(out, json!({"metadata": {"labels": {"b": "2"}}}));
    }

    #[test]
    fn a_test_for_null_passes_on_a_missing_member() {
        let obj = json!({"metadata": {"name": "g"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
            {"op": "test", "path": "/metadata/finalizers/0", "value": "x"}
        ]);
        let err = apply(PatchType::Json, &obj, &patch)
            .unwrap_err()
            .to_string();
        assert!(err.contains("operation '/2' failed"), "{err}");
        let two = json!(patch.as_array().unwrap()[..2]);
        let out = apply(PatchType::Json, &obj, &two).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        let present = json!([{"op": "test", "path": "/metadata/name", "value": null}]);
        assert!(
            apply(PatchType::Json, &obj, &present).is_err(),
            "a member that is there is not null"
        );
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let obj = json!({"data": {"a": "1"}});
        let out = apply(
            PatchType::Json,
            &obj,
            &json!([{"op": "replace", "path": "/data/a", "value": "2"}]),
        )
        .unwrap();
        assert_eq!(out["data"]["a"], "2");
        let err = apply(
            PatchType::Json,
            &obj,
            &json!([{"op": "remove", "path": "/nope"}]),
        )
        .unwrap_err();
        assert_eq!(err.code(), 422);
        assert_eq!(
            apply(PatchType::Json, &obj, &json!({"op": 1}))
                .unwrap_err()
                .code(),
            400
        );
    }
}
