//! Reviews: create-only resources that answer a question and store
//! nothing. Capstan has no authorization yet, so every request is
//! allowed; the access reviews say so to the clients that ask (`kubectl
//! auth can-i`, `kubectl auth can-i --list`) instead of a 404 they would
//! report as an error. The authentication reviews (`kubectl auth whoami`,
//! TokenReview) get their status from `routes::identity`.

use serde_json::{json, Value};

use super::request_info::{RequestInfo, Verb};
use crate::error::ApiError;

/// One review resource, as discovery lists it.
pub struct Review {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

const fn review(resource: &'static str, kind: &'static str, namespaced: bool) -> Review {
    Review {
        group: "authorization.k8s.io",
        version: "v1",
        resource,
        kind,
        namespaced,
    }
}

pub const REVIEWS: [Review; 6] = [
    review("selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
    review("selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
    review("subjectaccessreviews", "SubjectAccessReview", false),
    review(
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    Review {
        group: "authentication.k8s.io",
        version: "v1",
        resource: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        namespaced: false,
    },
    Review {
        group: "authentication.k8s.io",
        version: "v1",
        resource: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
    },
];

const WHY: &str = "capstan serves every request: it has no authorization yet";

pub fn find(info: &RequestInfo) -> Option<&'static Review> {
    REVIEWS
        .iter()
        .find(|r| r.group == info.group && r.version == info.version && r.resource == info.resource)
}

/// The answered review: the request's spec with a status.
pub fn answer(review: &Review, info: &RequestInfo, body: &Value) -> Result<Value, ApiError> {
    let scoped = info.namespace.is_some();
    if info.verb != Verb::Create || info.name.is_some() || scoped != review.namespaced {
        return Err(ApiError::MethodNotAllowed);
    }
    let api_version = format!("{}/{}", review.group, review.version);
    let kind_ok = body["kind"].as_str().is_none_or(|k| k == review.kind);
    let version_ok = body["apiVersion"].as_str().is_none_or(|v| v == api_version);
    if !body.is_object() || !kind_ok || !version_ok {
        return Err(ApiError::BadRequest(format!(
            "the body of the request is not a {} of {api_version}",
            review.kind
        )));
    }
    let status = match review.kind {
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false}),
        // Filled in by `routes::identity`, which knows the user.
        "SelfSubjectReview" | "TokenReview" => json!({}),
        _ => json!({"allowed": true, "reason": WHY}),
    };
    let mut metadata = body["metadata"].clone();
    if !metadata.is_object() {
        metadata = json!({});
    }
    metadata["creationTimestamp"] = Value::Null;
    Ok(
        json!({"kind": review.kind, "apiVersion": api_version, "metadata": metadata,
              "spec": body["spec"], "status": status}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    fn info(path: &str) -> RequestInfo {
        RequestInfo::parse(&Method::POST, path, false).unwrap()
    }

    #[test]
    fn can_i_is_always_yes() {
        let access = info("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
        let review = find(&access).unwrap();
        let body = json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}}});
        let answered = answer(review, &access, &body).unwrap();
        assert_eq!(answered["status"]["allowed"], true);
        assert_eq!(answered["spec"], body["spec"]);
        let local = info("/apis/authorization.k8s.io/v1/localsubjectaccessreviews");
        assert!(answer(find(&local).unwrap(), &local, &json!({})).is_err());
    }
}
