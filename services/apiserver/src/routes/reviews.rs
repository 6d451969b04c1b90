//! Reviews: create-only resources that answer a question and store
//! nothing, answered by the chain's own authorizer, so `kubectl auth
//! can-i [--as]` and `kubectl auth can-i --list` get the answers requests
//! get: SubjectAccessReview (any user, asked by someone allowed to),
//! LocalSubjectAccessReview (the same in one namespace),
//! SelfSubjectAccessReview and SelfSubjectRulesReview (the requester),
//! and SelfSubjectReview (`kubectl auth whoami`). The authentication
//! reviews (whoami, TokenReview) are answered by `routes::identity`.

use serde_json::{json, Value};

use super::request_info::{RequestInfo, Verb};
use crate::auth::{Attributes, Authorizer, Decision, UserInfo};
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

pub fn find(info: &RequestInfo) -> Option<&'static Review> {
    REVIEWS
        .iter()
        .find(|r| r.group == info.group && r.version == info.version && r.resource == info.resource)
}

/// The answered review: the request's spec with a status. `user` made the
/// request; `authorizer` answers the question.
pub fn answer(
    review: &Review,
    info: &RequestInfo,
    body: &Value,
    user: &UserInfo,
    authorizer: &dyn Authorizer,
) -> Result<Value, ApiError> {
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
    let spec = &body["spec"];
    let invalid = |why: String| ApiError::BadRequest(format!("{} is invalid: {why}", review.kind));
    let status = match review.kind {
        "SelfSubjectRulesReview" => rules(spec, user, authorizer),
        "SelfSubjectReview" => json!({"userInfo": {"username": user.name, "groups": user.groups}}),
        // Filled in by `routes::identity`, which checks the token.
        "TokenReview" => json!({}),
        "SelfSubjectAccessReview" => access(spec, user, None, authorizer).map_err(invalid)?,
        "LocalSubjectAccessReview" => {
            let subject = subject_of(spec).map_err(invalid)?;
            access(spec, &subject, info.namespace.as_deref(), authorizer).map_err(invalid)?
        }
        _ => {
            access(spec, &subject_of(spec).map_err(invalid)?, None, authorizer).map_err(invalid)?
        }
    };
    let mut metadata = body["metadata"].clone();
    if !metadata.is_object() {
        metadata = json!({});
    }
    metadata["creationTimestamp"] = Value::Null;
    Ok(
        json!({"kind": review.kind, "apiVersion": api_version, "metadata": metadata,
              "spec": spec, "status": status}),
    )
}

/// The user a (Local)SubjectAccessReview asks about.
fn subject_of(spec: &Value) -> Result<UserInfo, String> {
    let name = spec["user"].as_str().unwrap_or("");
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if name.is_empty() && groups.is_empty() {
        return Err(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
                .into(),
        );
    }
    Ok(UserInfo {
        name: name.to_string(),
        groups,
        ..UserInfo::default()
    })
}

/// The status of an access review of `spec` for `user`; `local` is the
/// namespace a LocalSubjectAccessReview was posted to.
fn access(
    spec: &Value,
    user: &UserInfo,
    local: Option<&str>,
    authorizer: &dyn Authorizer,
) -> Result<Value, String> {
    let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    if resource.is_object() == non_resource.is_object() {
        return Err("spec: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into());
    }
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or("").to_string();
    let verb = text(
        if resource.is_object() {
            resource
        } else {
            non_resource
        },
        "verb",
    );
    let namespace = text(resource, "namespace");
    if let Some(local) = local {
        if !resource.is_object() || namespace != local {
            return Err(format!("spec.resourceAttributes.namespace: Invalid value: {namespace:?}: must match metadata.namespace"));
        }
    }
    let (group, resource_name) = (text(resource, "group"), text(resource, "resource"));
    let (subresource, name, path) = (
        text(resource, "subresource"),
        text(resource, "name"),
        text(non_resource, "path"),
    );
    let attributes = match resource.is_object() {
        true => Attributes::for_resource(user, &verb, &group, &resource_name)
            .with_subresource(&subresource)
            .with_namespace(&namespace)
            .with_name(&name),
        false => Attributes::for_path(user, &verb, &path),
    };
    Ok(match authorizer.authorize(&attributes) {
        Decision::Allow => json!({"allowed": true}),
        Decision::Deny(reason) => json!({"allowed": false, "denied": true, "reason": reason}),
        Decision::NoOpinion(reason) if reason.is_empty() => json!({"allowed": false}),
        Decision::NoOpinion(reason) => json!({"allowed": false, "reason": reason}),
    })
}

/// A SelfSubjectRulesReview's status: the rules the requester holds in
/// `spec.namespace`, resource and non-resource apart.
fn rules(spec: &Value, user: &UserInfo, authorizer: &dyn Authorizer) -> Value {
    let namespace = spec["namespace"].as_str().unwrap_or("");
    let list = authorizer.rules_for(user, namespace);
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for rule in &list.rules {
        if !rule.resources.is_empty() {
            resource_rules.push(json!({"verbs": rule.verbs, "apiGroups": rule.api_groups,
                "resources": rule.resources, "resourceNames": rule.resource_names}));
        }
        if !rule.non_resource_urls.is_empty() {
            non_resource_rules
                .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                            "incomplete": list.incomplete});
    if !list.errors.is_empty() {
        status["evaluationError"] = json!(list.errors.join(", "));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::PrivilegedGroups;
    use actix_web::http::Method;

    fn info(path: &str) -> RequestInfo {
        RequestInfo::parse(&Method::POST, path, false).unwrap()
    }

    fn ask(path: &str, body: Value, user: &UserInfo) -> Result<Value, ApiError> {
        let info = info(path);
        let masters = PrivilegedGroups(vec!["system:masters".into()]);
        answer(find(&info).unwrap(), &info, &body, user, &masters)
    }

    #[test]
    fn reviews_are_answered_by_the_authorizer_for_the_user_asked_about() {
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        };
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let spec =
            json!({"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "a"}});
        let own = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        let answered = ask(own, json!({"spec": spec}), &admin).unwrap();
        assert_eq!(answered["status"]["allowed"], true);
        assert_eq!(answered["spec"], spec);
        assert_eq!(
            ask(own, json!({"spec": spec}), &alice).unwrap()["status"]["allowed"],
            false
        );
        let sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
        let about_alice =
            json!({"spec": {"user": "alice", "resourceAttributes": spec["resourceAttributes"]}});
        assert_eq!(
            ask(sar, about_alice, &admin).unwrap()["status"]["allowed"],
            false
        );
        assert!(ask(sar, json!({"spec": spec}), &admin).is_err());
        let local = "/apis/authorization.k8s.io/v1/namespaces/b/localsubjectaccessreviews";
        let elsewhere = json!({"spec": {"groups": ["system:masters"], "resourceAttributes": spec["resourceAttributes"]}});
        assert!(ask(local, elsewhere, &admin).is_err());
        let whoami = ask(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json!({}),
            &alice,
        )
        .unwrap();
        assert_eq!(whoami["status"]["userInfo"]["username"], "alice");
    }
}
