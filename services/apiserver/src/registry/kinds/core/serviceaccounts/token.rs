//! `POST .../serviceaccounts/<name>/token`: a TokenRequest
//! (authentication.k8s.io/v1) answered with a signed token for the
//! service account, for the audiences asked (the server's by default),
//! for `expirationSeconds` (an hour by default, at least ten minutes),
//! and bound to a Pod or Secret when `boundObjectRef` names one: the
//! token is valid only while that object exists (what
//! `kubectl create token SA --duration --audience --bound-object-kind
//! --bound-object-name` asks for). The TokenRequest is admitted first, as
//! a CREATE of `serviceaccounts/token` (webhooks, policies and
//! NodeRestriction see it, and the token is made from what they leave).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::admission::objects::{Freshness, Objects, Resource, PODS, SECRETS, SERVICE_ACCOUNTS};
use crate::error::{ApiError, Cause, Target};
use crate::object::time;
use crate::registry::subresource::{Answer, Call, Handler, ResponseKind, Serve, Subresource};
use crate::serviceaccount::{asked_audiences, Binding, Claims, ObjectRef, TokenError};

/// The `token` entry of the service accounts' table.
pub const TOKEN: Subresource = Subresource {
    name: "token",
    response: Some(ResponseKind {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenRequest",
    }),
    verbs: &["create"],
    serve: Serve::Create(&TokenRequest),
    collection: None,
};

pub struct TokenRequest;

impl Handler for TokenRequest {
    fn serve<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Answer, ApiError>> {
        Box::pin(async move {
            let body = create(&call).await?;
            Ok(Answer { code: 201, body })
        })
    }
}

const API_VERSION: &str = "authentication.k8s.io/v1";
const DEFAULT_SECONDS: i64 = 3600;
const MIN_SECONDS: i64 = 600;
const MAX_SECONDS: i64 = 1 << 32;

/// Answers a TokenRequest for the service account `call` names.
async fn create(call: &Call<'_>) -> Result<Value, ApiError> {
    let (namespace, name) = (call.namespace, call.name);
    let objects = call.services.objects.as_ref();
    let issuer = call
        .services
        .issuer
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable(TokenError::CannotSign.to_string()))?;
    let body = call.body.clone().unwrap_or_default();
    expiration(&body)?;
    let mut body = call.admissible(body, API_VERSION, "TokenRequest");
    call.admit_create(TOKEN.name, &mut body).await?;
    let spec = &body["spec"];
    let seconds = expiration(&body)?;
    let audiences = asked_audiences(spec, &issuer.audiences);
    let account = current(objects, SERVICE_ACCOUNTS, namespace, name)
        .await?
        .ok_or_else(|| ApiError::NotFound(target("serviceaccounts", name)))?;
    let binding = bound_object(objects, namespace, &spec["boundObjectRef"]).await?;
    let account = ObjectRef {
        name: name.to_string(),
        uid: account["metadata"]["uid"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    };
    let now = ::time::OffsetDateTime::now_utc().unix_timestamp();
    let claims = Claims::new(
        &issuer.issuer,
        namespace,
        account,
        audiences.clone(),
        now,
        seconds,
        binding,
    );
    let token = issuer
        .sign(&claims)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut spec = spec.clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(seconds);
    Ok(json!({
        "kind": "TokenRequest", "apiVersion": API_VERSION,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": time::at(now)},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": time::at(claims.exp)},
    }))
}

fn target(resource: &str, name: &str) -> Target {
    Target {
        group: String::new(),
        resource: resource.into(),
        name: name.into(),
    }
}

/// `spec.expirationSeconds`, checked as kube-apiserver checks it.
fn expiration(body: &Value) -> Result<i64, ApiError> {
    let kind_ok = body["kind"].as_str().is_none_or(|k| k == "TokenRequest");
    if !body.is_object() || !kind_ok {
        return Err(ApiError::BadRequest(format!(
            "the body of the request is not a TokenRequest of {API_VERSION}"
        )));
    }
    let seconds = match &body["spec"]["expirationSeconds"] {
        Value::Null => return Ok(DEFAULT_SECONDS),
        value => value.as_i64().unwrap_or(-1),
    };
    let why = match seconds {
        s if s < MIN_SECONDS => "may not specify a duration less than 10 minutes",
        s if s > MAX_SECONDS => "may not specify a duration larger than 2^32 seconds",
        _ => return Ok(seconds),
    };
    let cause = Cause::invalid("spec.expirationSeconds", &seconds.to_string(), why);
    Err(ApiError::invalid(
        target("", ""),
        "TokenRequest",
        vec![cause],
    ))
}

/// The Pod or Secret a token is to be bound to, which must exist (with
/// the uid given, if one is).
async fn bound_object(
    objects: &dyn Objects,
    namespace: &str,
    reference: &Value,
) -> Result<Option<Binding>, ApiError> {
    if reference.is_null() {
        return Ok(None);
    }
    let kind = reference["kind"].as_str().unwrap_or("");
    let name = reference["name"].as_str().unwrap_or("");
    let api_version = reference["apiVersion"].as_str().unwrap_or("v1");
    if !matches!(kind, "Pod" | "Secret") || api_version != "v1" || name.is_empty() {
        let cause = Cause::invalid(
            "spec.boundObjectRef",
            &format!("{api_version} {kind} {name}"),
            "a token can be bound to a v1 Pod or Secret, named",
        );
        return Err(ApiError::invalid(
            target("", ""),
            "TokenRequest",
            vec![cause],
        ));
    }
    let (resource, of_kind) = match kind {
        "Pod" => ("pods", PODS),
        _ => ("secrets", SECRETS),
    };
    let object = current(objects, of_kind, namespace, name)
        .await?
        .ok_or_else(|| ApiError::NotFound(target(resource, name)))?;
    let uid = object["metadata"]["uid"].as_str().unwrap_or("").to_string();
    if let Some(asked) = reference["uid"].as_str().filter(|u| !u.is_empty()) {
        if asked != uid {
            return Err(ApiError::Conflict(
                target(resource, name),
                format!(
                    "the UID in the bound object reference ({asked}) does not match the UID in record. \
                     The object might have been deleted and then recreated"
                ),
            ));
        }
    }
    let bound = ObjectRef {
        name: name.to_string(),
        uid,
    };
    Ok(Some(match kind {
        "Pod" => Binding::Pod(bound),
        _ => Binding::Secret(bound),
    }))
}

/// The object as the store holds it now, or None if there is none.
async fn current(
    objects: &dyn Objects,
    resource: Resource,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    let found = objects.get(resource, namespace, name, Freshness::Current);
    found
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))
}
