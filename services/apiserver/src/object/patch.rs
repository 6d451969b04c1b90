//! The PATCH content types and how each one changes an object, within
//! the bounds of [`super::limits`]: a JSON patch's `copy` operations may
//! add up to [`MAX_COPY_BYTES`] (kube's limit, which stops a patch of a
//! few `copy` operations from doubling an object again and again), and
//! no patch may nest what it adds deeper than [`MAX_DEPTH`]. A JSON patch
//! is checked operation by operation, before each one runs, so a runaway
//! patch stops before it has grown anything.

use json_patch::jsonptr::Pointer;
use json_patch::PatchOperation;
use serde_json::Value;

use super::limits::{self, MAX_COPY_BYTES, MAX_DEPTH};
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
    let patched = match kind {
        PatchType::Json => json_patch_apply(original, patch)?,
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest(
                    "merge patch must be a JSON object".into(),
                ));
            }
            let mut doc = original.clone();
            json_patch::merge(&mut doc, patch);
            doc
        }
        PatchType::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest(
                    "strategic merge patch must be a JSON object".into(),
                ));
            }
            strategic::merge(original, patch)
        }
        // Server-side apply needs the field owners, which the registry's
        // patch flow brings (see `object::apply`); it never comes here.
        PatchType::Apply => {
            return Err(ApiError::Internal(
                "an apply patch is merged with object::apply".into(),
            ))
        }
    };
    no_deeper(original, &patched)?;
    Ok(patched)
}

/// A merge patch puts its values where they are in the patch, so the
/// result is no deeper than the patch or the original; but the patch body
/// was read with serde_json's limit (127 levels), deeper than the objects
/// the server keeps. An object stored deeper before keeps its depth.
fn no_deeper(original: &Value, patched: &Value) -> Result<(), ApiError> {
    let depth = limits::depth(patched);
    match depth > MAX_DEPTH && depth > limits::depth(original) {
        true => Err(too_deep()),
        false => Ok(()),
    }
}

fn too_deep() -> ApiError {
    ApiError::invalid_patch(format!(
        "the patched object would be nested more than {MAX_DEPTH} levels deep"
    ))
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
    let mut tally = Tally::default();
    for (index, op) in ops.iter().enumerate() {
        if tests_missing_for_null(&doc, op) {
            continue;
        }
        tally.admit(&doc, op)?;
        json_patch::patch(&mut doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = index;
            ApiError::invalid_patch(e.to_string())
        })?;
    }
    Ok(doc)
}

/// What one JSON patch's operations have measured so far: the bytes
/// its copies added, and the bytes of what it moved lower in the object
/// (measured for their depth; nothing is copied, but measuring is work,
/// and a patch moving a large subtree down and back up thousands of
/// times would otherwise have the server walk it thousands of times).
#[derive(Default)]
struct Tally {
    copied: usize,
    walked: usize,
}

/// What the moves of one patch may walk: far more than any patch that
/// restructures an object needs.
const MAX_WALKED_BYTES: usize = 4 * MAX_COPY_BYTES;

impl Tally {
    /// Refuses `op` if it would nest what it places deeper than
    /// [`MAX_DEPTH`], take the copies past [`MAX_COPY_BYTES`] or the
    /// walks past [`MAX_WALKED_BYTES`]. Only what an operation adds,
    /// copies or moves lower is measured, never the whole object.
    fn admit(&mut self, doc: &Value, op: &PatchOperation) -> Result<(), ApiError> {
        let (path, placed) = match op {
            PatchOperation::Add(add) => (&add.path, limits::depth(&add.value)),
            PatchOperation::Replace(replace) => (&replace.path, limits::depth(&replace.value)),
            PatchOperation::Copy(copy) => {
                let Some(source) = doc.pointer(copy.from.as_str()) else {
                    return Ok(());
                };
                let found = limits::measure(source);
                self.copied += found.bytes;
                if self.copied > MAX_COPY_BYTES {
                    return Err(copy_limit(self.copied));
                }
                (&copy.path, found.depth)
            }
            // A move to where it came from or higher nests nothing deeper.
            PatchOperation::Move(moved) if levels(&moved.path) > levels(&moved.from) => {
                let Some(source) = doc.pointer(moved.from.as_str()) else {
                    return Ok(());
                };
                let found = limits::measure(source);
                self.walked += found.bytes;
                if self.walked > MAX_WALKED_BYTES {
                    return Err(ApiError::invalid_patch(format!(
                        "the patch moves more than {MAX_WALKED_BYTES} bytes of the object to deeper places"
                    )));
                }
                (&moved.path, found.depth)
            }
            _ => return Ok(()),
        };
        match levels(path) + placed > MAX_DEPTH {
            true => Err(too_deep()),
            false => Ok(()),
        }
    }
}

/// How many containers hold what a JSON pointer names.
fn levels(pointer: &Pointer) -> usize {
    pointer.as_str().matches('/').count()
}

/// kube's words (evanphx/json-patch's), in kube's 422.
fn copy_limit(copied: usize) -> ApiError {
    ApiError::invalid_patch(format!(
        "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
    ))
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

    fn nest(depth: usize) -> Value {
        (0..depth).fold(json!("bottom"), |inner, _| {
            let mut outer = serde_json::Map::new();
            outer.insert("n".into(), inner);
            Value::Object(outer)
        })
    }

    #[test]
    fn copies_stop_at_kube_limit_before_they_double_the_object() {
        let obj = json!({"data": {"a": "x".repeat(2048)}});
        let mut ops = vec![json!({"op": "add", "path": "/x", "value": ["y".repeat(2048)]})];
        ops.extend((0..30).map(|_| json!({"op": "copy", "from": "/x", "path": "/x/-"})));
        let err = apply(PatchType::Json, &obj, &Value::from(ops)).unwrap_err();
        assert_eq!(err.code(), 422);
        let text = err.to_string();
        assert!(
            text.contains("Unable to complete the copy, the accumulated size increase of copy is")
                && text.contains("exceeding the limit 3145728"),
            "{text}"
        );
        let few = json!([{"op": "copy", "from": "/data/a", "path": "/data/b"}]);
        let out = apply(PatchType::Json, &obj, &few).unwrap();
        assert_eq!(out["data"]["b"], obj["data"]["a"]);
    }

    #[test]
    fn nothing_a_patch_places_nests_past_the_limit() {
        let obj = json!({"metadata": {"name": "n"}});
        let deep_add = json!([{"op": "add", "path": "/a", "value": nest(MAX_DEPTH)}]);
        assert!(apply(PatchType::Json, &obj, &deep_add).is_err());
        let fits = json!([{"op": "add", "path": "/a", "value": nest(MAX_DEPTH - 1)}]);
        let out = apply(PatchType::Json, &obj, &fits).unwrap();
        assert_eq!(limits::depth(&out), MAX_DEPTH);
        // Two chains moved into each other's bottoms: deeper by each move.
        let bottom = |top: &str| format!("/{top}{}", "/n".repeat(49));
        let ops = json!([
            {"op": "add", "path": "/a", "value": nest(50)},
            {"op": "add", "path": "/b", "value": nest(50)},
            {"op": "move", "from": "/a", "path": format!("{}/a", bottom("b"))},
        ]);
        let err = apply(PatchType::Json, &obj, &ops).unwrap_err();
        assert!(
            err.to_string().contains("nested more than 100 levels"),
            "{err}"
        );
        let merge = json!({"a": nest(MAX_DEPTH + 10)});
        assert_eq!(
            apply(PatchType::Merge, &obj, &merge).unwrap_err().code(),
            422
        );
    }

    #[test]
    fn an_object_stored_deeper_before_can_still_be_patched() {
        let obj = json!({"a": nest(MAX_DEPTH + 5), "data": {"k": "v"}});
        let merge = json!({"data": {"k": "w"}});
        assert_eq!(
            apply(PatchType::Merge, &obj, &merge).unwrap()["data"]["k"],
            "w"
        );
        let shallower = json!([{"op": "move", "from": "/a/n", "path": "/b"}]);
        assert!(apply(PatchType::Json, &obj, &shallower).is_ok());
    }
}
