//! The AdmissionReview codec (admission.k8s.io/v1, or v1beta1 for a
//! webhook that only takes that: the same fields): the request a webhook
//! is sent, and its response checked as kube checks it (the kind, the
//! request's uid, a patch only with its type) and turned into a verdict.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use serde::Deserialize;
use serde_json::{json, Value};

use super::super::{Attributes, Operation, Rejection};

/// An AdmissionReview request for `attributes` on `object` (none on
/// delete), in `version`; with the uid its response must carry.
pub fn request(
    version: &str,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
) -> (String, Value) {
    let uid = uuid::Uuid::new_v4().to_string();
    let a = attributes;
    let typed = object.or(a.old_object);
    let kind = typed.map(group_version_kind).unwrap_or_default();
    let resource = json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut request = json!({
        "uid": uid,
        "kind": kind, "resource": resource,
        "requestKind": kind, "requestResource": resource,
        "name": a.name, "namespace": a.namespace,
        "operation": a.operation.as_str(),
        "userInfo": a.user.to_json(),
        "object": object, "oldObject": a.old_object,
        "dryRun": a.dry_run,
        "options": options(a.operation, a.dry_run),
    });
    if !a.subresource.is_empty() {
        request["subResource"] = a.subresource.into();
        request["requestSubResource"] = a.subresource.into();
    }
    let review = json!({
        "apiVersion": format!("admission.k8s.io/{version}"),
        "kind": "AdmissionReview",
        "request": request,
    });
    (uid, review)
}

/// `{"group", "version", "kind"}` from an object's apiVersion and kind.
fn group_version_kind(object: &Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    json!({"group": group, "version": version, "kind": object["kind"]})
}

/// The options kube sends with each operation.
fn options(operation: Operation, dry_run: bool) -> Value {
    let kind = match operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return Value::Null,
    };
    let mut options = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
    if dry_run {
        options["dryRun"] = json!(["All"]);
    }
    options
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<Status>,
    patch: Option<ByteString>,
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    audit_annotations: BTreeMap<String, String>,
}

/// The part of a response's metav1.Status a refusal uses.
#[derive(Debug, Default, Deserialize)]
pub struct Status {
    pub code: Option<i64>,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// What a webhook answered.
#[derive(Debug)]
pub struct Verdict {
    pub allowed: bool,
    pub status: Option<Status>,
    /// A JSONPatch (only ever with patchType JSONPatch).
    pub patch: Option<Vec<u8>>,
    /// Texts for the client's `Warning` headers, allowed or not.
    pub warnings: Vec<String>,
    /// Audit annotations, by the webhook's own keys.
    pub audit_annotations: BTreeMap<String, String>,
}

/// Why a response is not a usable AdmissionReview.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ReviewError {
    #[error("{0}")]
    Garbage(String),
    #[error("expected webhook response of admission.k8s.io/{0}, Kind=AdmissionReview, got {1}, Kind={2}")]
    WrongKind(String, String, String),
    #[error("webhook response was absent")]
    Absent,
    #[error("expected response.uid={0:?}, got {1:?}")]
    WrongUid(String, String),
    #[error("webhook returned response.patch but not response.patchType")]
    PatchWithoutType,
    #[error("webhook returned response.patchType but not response.patch")]
    TypeWithoutPatch,
    #[error("webhook returned invalid response.patchType of {0:?}")]
    BadPatchType(String),
}

/// The verdict in `body`, the answer to the request with `uid`.
pub fn verdict(body: &[u8], version: &str, uid: &str) -> Result<Verdict, ReviewError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| ReviewError::Garbage(e.to_string()))?;
    let expected = format!("admission.k8s.io/{version}");
    if review.api_version != expected || review.kind != "AdmissionReview" {
        let (v, k) = (review.api_version, review.kind);
        return Err(ReviewError::WrongKind(version.into(), v, k));
    }
    let response = review.response.ok_or(ReviewError::Absent)?;
    if response.uid != uid {
        return Err(ReviewError::WrongUid(uid.into(), response.uid));
    }
    let patch = response.patch.map(|p| p.0).filter(|p| !p.is_empty());
    match (&patch, response.patch_type.as_deref()) {
        (Some(_), None) => return Err(ReviewError::PatchWithoutType),
        (None, Some(_)) => return Err(ReviewError::TypeWithoutPatch),
        (Some(_), Some(kind)) if kind != "JSONPatch" => {
            return Err(ReviewError::BadPatchType(kind.into()))
        }
        _ => {}
    }
    Ok(Verdict {
        allowed: response.allowed,
        status: response.status,
        patch,
        warnings: response.warnings,
        audit_annotations: response.audit_annotations,
    })
}

/// kube's refusal from a webhook's status: its code (at least 400), its
/// reason, and `admission webhook "<name>" denied the request: <message>`.
pub fn denial(name: &str, status: Option<&Status>) -> Rejection {
    let empty = Status::default();
    let status = status.unwrap_or(&empty);
    let denied = format!("admission webhook {name:?} denied the request");
    let text = |s: &Option<String>| s.clone().filter(|m| !m.is_empty());
    let message = match text(&status.message).or_else(|| text(&status.reason)) {
        Some(why) => format!("{denied}: {why}"),
        None => format!("{denied} without explanation"),
    };
    let code = status.code.unwrap_or(0);
    Rejection {
        code: u16::try_from(code)
            .ok()
            .filter(|c| (400..600).contains(c))
            .unwrap_or(400),
        reason: status.reason.clone().unwrap_or_default(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::UserInfo;

    fn attributes(user: &UserInfo) -> Attributes<'_> {
        Attributes {
            operation: Operation::Create,
            old_object: None,
            namespace: "ns",
            name: "web",
            group: "apps",
            version: "v1",
            resource: "deployments",
            subresource: "",
            dry_run: true,
            user,
            feedback: Box::leak(Box::default()),
        }
    }

    #[test]
    fn the_request_carries_what_kube_sends() {
        let mut user = UserInfo::anonymous();
        user.uid = "u-1".into();
        user.extra.insert("scopes".into(), vec!["a".into()]);
        let object =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let (uid, review) = request("v1", &attributes(&user), Some(&object));
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        let r = &review["request"];
        assert_eq!(r["uid"], uid.as_str());
        assert_eq!(
            r["kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(
            r["resource"],
            json!({"group": "apps", "version": "v1", "resource": "deployments"})
        );
        assert_eq!(r["requestKind"], r["kind"]);
        assert_eq!(
            (r["operation"].as_str(), r["namespace"].as_str()),
            (Some("CREATE"), Some("ns"))
        );
        assert_eq!(r["userInfo"]["username"], "system:anonymous");
        assert_eq!(r["userInfo"]["uid"], "u-1");
        assert_eq!(r["userInfo"]["extra"], json!({"scopes": ["a"]}));
        assert_eq!(r["object"], object);
        assert_eq!(r["oldObject"], Value::Null);
        assert_eq!(r["dryRun"], true);
        assert_eq!(r["options"]["kind"], "CreateOptions");
        assert_eq!(r["options"]["dryRun"], json!(["All"]));
        assert!(r.get("subResource").is_none());
    }

    fn answer(response: Value) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn responses_are_checked_before_they_count() {
        let ok = verdict(&answer(json!({"uid": "u", "allowed": true})), "v1", "u").unwrap();
        assert!(ok.allowed && ok.patch.is_none());
        assert!(ok.warnings.is_empty() && ok.audit_annotations.is_empty());
        let noted = answer(
            json!({"uid": "u", "allowed": false, "warnings": ["w1", "w2"],
                                  "auditAnnotations": {"k": "v"}}),
        );
        let noted = verdict(&noted, "v1", "u").unwrap();
        assert_eq!(noted.warnings, ["w1", "w2"]);
        assert_eq!(noted.audit_annotations["k"], "v");
        // "W10=" is "[]".
        let patched =
            answer(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch"}));
        assert_eq!(verdict(&patched, "v1", "u").unwrap().patch.unwrap(), b"[]");
        let cases = [
            (b"nonsense".to_vec(), "expected ident at line 1 column 2"),
            (answer(json!({"uid": "x", "allowed": true})), "expected response.uid=\"u\", got \"x\""),
            (answer(Value::Null), "webhook response was absent"),
            (answer(json!({"uid": "u", "allowed": true, "patch": "W10="})),
             "webhook returned response.patch but not response.patchType"),
            (answer(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "Merge"})),
             "webhook returned invalid response.patchType of \"Merge\""),
            (br#"{"apiVersion": "v1", "kind": "Status"}"#.to_vec(),
             "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status"),
        ];
        for (body, message) in cases {
            assert_eq!(verdict(&body, "v1", "u").unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn denials_read_as_kube_shows_them() {
        let status = Status {
            code: Some(403),
            reason: Some("Forbidden".into()),
            message: Some("no pods labelled deny".into()),
        };
        let denied = denial("deny.example.com", Some(&status));
        assert_eq!(
            denied.message,
            "admission webhook \"deny.example.com\" denied the request: no pods labelled deny"
        );
        assert_eq!((denied.code, denied.reason.as_str()), (403, "Forbidden"));
        let bare = denial("d.example.com", None);
        assert_eq!(
            bare.message,
            "admission webhook \"d.example.com\" denied the request without explanation"
        );
        assert_eq!((bare.code, bare.reason.as_str()), (400, ""));
        let low = Status {
            code: Some(200),
            ..Status::default()
        };
        assert_eq!(denial("d.example.com", Some(&low)).code, 400);
    }
}
