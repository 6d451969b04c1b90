//! API errors: one enum for everything a request can fail with, rendered
//! once, at the HTTP boundary, as a Kubernetes `Status` object.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Value};

/// One field-level validation failure (`details.causes[]` of an Invalid).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// FieldValueRequired, FieldValueInvalid, FieldValueForbidden, ...
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl Cause {
    pub fn required(field: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }

    pub fn invalid(field: impl Into<String>, value: &str, why: impl AsRef<str>) -> Cause {
        let message = format!("Invalid value: {}: {}", Value::from(value), why.as_ref());
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message,
        }
    }

    pub fn forbidden(field: impl Into<String>, why: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {}", why.into()),
        }
    }
}

/// Names the object an error is about, as `details` does.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub group: String,
    /// Plural resource name (`pods`).
    pub resource: String,
    pub name: String,
}

impl Target {
    /// `pods` or `deployments.apps`, as Kubernetes messages spell it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The details of a 422 Invalid (boxed: errors travel by value a lot).
#[derive(Debug)]
pub struct Invalid {
    pub target: Target,
    pub kind: String,
    pub causes: Vec<Cause>,
}

/// A refusal by an admission policy that chooses its own reason (kube's
/// ValidatingAdmissionPolicy: Invalid by default, Forbidden, ...).
#[derive(Debug)]
pub struct Refusal {
    pub target: Target,
    /// Invalid, Forbidden, Unauthorized or RequestEntityTooLarge.
    pub reason: &'static str,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{} \"{}\" not found", .0.qualified(), .0.name)]
    NotFound(Target),
    #[error("{} \"{}\" already exists", .0.qualified(), .0.name)]
    AlreadyExists(Target),
    #[error("Operation cannot be fulfilled on {} \"{}\": {}", .0.qualified(), .0.name, .1)]
    Conflict(Target, String),
    #[error("{} \"{}\" is invalid: {}", .0.kind, .0.target.name, render_causes(&.0.causes))]
    Invalid(Box<Invalid>),
    /// A server-side apply that would change fields other managers own:
    /// the message and one `FieldManagerConflict` cause per field.
    #[error("{0}")]
    ApplyConflict(String, Vec<Cause>),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    /// kube's admission form (`<resource> "<name>" is forbidden: ...`)
    /// with the refusing policy's reason and code.
    #[error("{} \"{}\" is forbidden: {}", .0.target.qualified(), .0.target.name, .0.message)]
    Refused(Box<Refusal>),
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("the server could not find the requested resource")]
    UnknownPath,
    #[error("only the following media types are accepted: {0}")]
    NotAcceptable(String),
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {0}"
    )]
    UnsupportedMediaType(String),
    #[error("the request is too large (limit: {0} bytes)")]
    TooLarge(usize),
    #[error("{0}")]
    Expired(String),
    /// A read or watch at a revision the store did not reach in time
    /// (requested, current). kube-apiserver's text, which its Timeout
    /// errors start with "Timeout: ".
    #[error("Timeout: Too large resource version: {0}, current: {1}")]
    TooLargeResourceVersion(i64, i64),
    /// A consistent read whose watch cache did not catch up with the
    /// store's revision in time.
    #[error("{0}")]
    CacheBehind(String),
    #[error("{0}")]
    Unavailable(String),
    /// The request's credentials were refused.
    #[error("Unauthorized")]
    Unauthorized,
    /// Flow control turned the request away; retry after so many
    /// seconds.
    #[error("Too many requests, please try again later.")]
    TooManyRequests(u64),
    #[error("{0}")]
    Internal(String),
    /// A refusal that brings its own code and reason (an admission
    /// webhook's `status`); the reason may be empty.
    #[error("{message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
    },
    /// An error sent with the warnings the request collected before it
    /// was refused (kube writes a request's Warning headers on every
    /// answer, refusals included); otherwise the inner error's answer.
    #[error("{error}")]
    Warned {
        error: Box<ApiError>,
        warnings: Vec<String>,
    },
}

fn render_causes(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    }
}

impl ApiError {
    pub fn invalid(target: Target, kind: &str, causes: Vec<Cause>) -> ApiError {
        ApiError::Invalid(Box::new(Invalid {
            target,
            kind: kind.to_string(),
            causes,
        }))
    }

    /// This error with `warnings` for the client (itself when none).
    pub fn with_warnings(self, warnings: Vec<String>) -> ApiError {
        match (self, warnings.is_empty()) {
            (error, true) => error,
            (
                ApiError::Warned {
                    error,
                    warnings: mut before,
                },
                false,
            ) => {
                before.extend(warnings);
                ApiError::Warned {
                    error,
                    warnings: before,
                }
            }
            (error, false) => ApiError::Warned {
                error: Box::new(error),
                warnings,
            },
        }
    }

    /// The conflict every stale resourceVersion gets.
    pub fn stale(target: Target) -> ApiError {
        let why = "the object has been modified; please apply your changes to the latest version and try again";
        ApiError::Conflict(target, why.into())
    }

    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound(_) | ApiError::UnknownPath => 404,
            ApiError::AlreadyExists(_) | ApiError::Conflict(..) | ApiError::ApplyConflict(..) => {
                409
            }
            ApiError::Invalid(_) => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::Forbidden(_) => 403,
            ApiError::Refused(refusal) => match refusal.reason {
                "Forbidden" => 403,
                "Unauthorized" => 401,
                "RequestEntityTooLarge" => 413,
                _ => 422,
            },
            ApiError::MethodNotAllowed => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::TooLarge(_) => 413,
            ApiError::Expired(_) => 410,
            ApiError::TooLargeResourceVersion(..) | ApiError::CacheBehind(_) => 504,
            ApiError::Unavailable(_) => 503,
            ApiError::Unauthorized => 401,
            ApiError::TooManyRequests(_) => 429,
            ApiError::Internal(_) => 500,
            ApiError::Status { code, .. } => *code,
            ApiError::Warned { error, .. } => error.code(),
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            ApiError::NotFound(_) | ApiError::UnknownPath => "NotFound",
            ApiError::AlreadyExists(_) => "AlreadyExists",
            ApiError::Conflict(..) | ApiError::ApplyConflict(..) => "Conflict",
            ApiError::Invalid(_) => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::Refused(refusal) => refusal.reason,
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::Expired(_) => "Expired",
            ApiError::TooLargeResourceVersion(..) | ApiError::CacheBehind(_) => "Timeout",
            ApiError::Unavailable(_) => "ServiceUnavailable",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::TooManyRequests(_) => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::Status { reason, .. } => reason,
            ApiError::Warned { error, .. } => error.reason(),
        }
    }

    fn target(&self) -> Option<&Target> {
        match self {
            ApiError::NotFound(t) | ApiError::AlreadyExists(t) | ApiError::Conflict(t, _) => {
                Some(t)
            }
            ApiError::Invalid(invalid) => Some(&invalid.target),
            ApiError::Refused(refusal) => Some(&refusal.target),
            _ => None,
        }
    }

    /// The `Status` object (`kind: Status`, `status: Failure`).
    pub fn status(&self) -> Value {
        if let ApiError::Warned { error, .. } = self {
            return error.status();
        }
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.to_string(),
            "reason": self.reason(), "code": self.code(),
        });
        if self.reason().is_empty() {
            // kube leaves an empty reason out (omitempty).
            status.as_object_mut().map(|s| s.remove("reason"));
        }
        if let Some(target) = self.target() {
            let mut details =
                json!({"name": target.name, "group": target.group, "kind": target.resource});
            if let ApiError::Invalid(invalid) = self {
                // kube's NewInvalid names the kind, not the resource.
                details["kind"] = invalid.kind.as_str().into();
                details["causes"] = invalid
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            if let ApiError::Refused(refusal) = self {
                details["causes"] = json!([{"message": refusal.message}]);
            }
            status["details"] = details;
        }
        if let ApiError::TooLargeResourceVersion(..) = self {
            // client-go's reflector recognises this error by its cause and
            // retries after the given delay.
            status["details"] = json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            });
        }
        if let ApiError::TooManyRequests(seconds) = self {
            status["details"] = json!({"retryAfterSeconds": seconds});
        }
        if let ApiError::ApplyConflict(_, causes) = self {
            let causes: Vec<Value> = causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            status["details"] = json!({ "causes": causes });
        }
        status
    }
}

/// A resource actor that stopped answering (its arbiter is gone).
impl From<actix::MailboxError> for ApiError {
    fn from(err: actix::MailboxError) -> ApiError {
        ApiError::Internal(format!("resource actor unavailable: {err}"))
    }
}

/// A `Warning` header's value as kube-apiserver writes it: code 299, no
/// agent, the text quoted.
pub fn warning_header(text: &str) -> String {
    format!("299 - {}", Value::from(text))
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status();
        let mut response = HttpResponse::build(self.status_code());
        // As kube-apiserver: a Status that asks for a retry says when in
        // the header too.
        if let Some(seconds) = status["details"]["retryAfterSeconds"].as_i64() {
            response.insert_header(("Retry-After", seconds.to_string()));
        }
        if let ApiError::Warned { warnings, .. } = self {
            for warning in warnings {
                response.append_header(("Warning", warning_header(warning)));
            }
        }
        response
            .content_type("application/json")
            .body(status.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_group_qualified_resource() {
        let target = Target {
            group: "apps".into(),
            resource: "deployments".into(),
            name: "web".into(),
        };
        let err = ApiError::NotFound(target);
        assert_eq!(err.to_string(), "deployments.apps \"web\" not found");
        assert_eq!(err.status()["details"]["kind"], "deployments");
        assert_eq!(err.status()["code"], 404);
    }

    #[test]
    fn too_large_resource_version_is_kube_apiservers_timeout() {
        let status = ApiError::TooLargeResourceVersion(1000, 500).status();
        assert_eq!(status["code"], 504);
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(
            status["message"],
            "Timeout: Too large resource version: 1000, current: 500"
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert_eq!(status["details"]["retryAfterSeconds"], 1);
    }

    #[test]
    fn invalid_lists_causes() {
        let target = Target {
            resource: "pods".into(),
            name: "Bad".into(),
            ..Default::default()
        };
        let err = ApiError::invalid(target, "Pod", vec![Cause::required("spec.containers")]);
        assert_eq!(
            err.to_string(),
            "Pod \"Bad\" is invalid: spec.containers: Required value"
        );
        assert_eq!(
            err.status()["details"]["causes"][0]["reason"],
            "FieldValueRequired"
        );
    }

    #[test]
    fn a_refusal_keeps_its_answer_and_sends_its_warnings() {
        let refusal = ApiError::Forbidden("no".into());
        assert!(matches!(
            ApiError::Forbidden("no".into()).with_warnings(vec![]),
            ApiError::Forbidden(_)
        ));
        let warned = refusal
            .with_warnings(vec!["first".into()])
            .with_warnings(vec!["second \"quoted\"".into()]);
        assert_eq!((warned.code(), warned.reason()), (403, "Forbidden"));
        assert_eq!(warned.status()["message"], "no");
        let response = warned.error_response();
        let headers: Vec<&str> = response
            .headers()
            .get_all("Warning")
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(
            headers,
            ["299 - \"first\"", "299 - \"second \\\"quoted\\\"\""]
        );
    }
}
