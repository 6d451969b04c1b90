//! Audit, the chain step after authentication: every request gets an
//! audit ID (the client's `Audit-ID` header, or a new one, echoed in the
//! response's `Audit-Id`), and when an audit policy is configured the
//! policy's level for the request decides what its [`Record`] writes at
//! each stage: RequestReceived, ResponseStarted (long-running requests),
//! ResponseComplete, or Panic. The events go to the audit backend, which
//! never makes a request wait on the disk.

use std::sync::Arc;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use bytes::Bytes;
use serde_json::Value;

use crate::audit::body::Reported;
use crate::audit::{Annotations, Auditor, Backend, Decision, Event, Level, ObjectReference};
use crate::audit::{ResponseStatus, Stage};
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::routes::request_info::{RequestInfo, Verb};

const AUDIT_ID: &str = "audit-id";

/// The step: the configured auditor, if any.
#[derive(Default)]
pub struct Audit {
    auditor: Option<Arc<Auditor>>,
}

/// What a request is about, for its event.
pub enum Target<'a> {
    Resource(&'a RequestInfo),
    /// Health, version, discovery and the like: the verb is the method.
    NonResource,
}

/// The record of one request; inert when the policy records nothing.
pub struct Record(Option<Active>);

struct Active {
    event: Event,
    decision: Decision,
    backend: Arc<dyn Backend>,
    long_running: bool,
}

/// The request's audit ID: the client's, or a new one.
pub fn request_id(req: &HttpRequest) -> String {
    req.headers()
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| !id.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// Echoes the audit ID to the client, as kube-apiserver always does.
pub fn echo_id(headers: &mut HeaderMap, id: &str) {
    if let Ok(value) = HeaderValue::from_str(id) {
        headers.insert(HeaderName::from_static(AUDIT_ID), value);
    }
}

impl Audit {
    pub fn new(auditor: Option<Auditor>) -> Audit {
        Audit {
            auditor: auditor.map(Arc::new),
        }
    }

    /// Starts the record of a request by `user` (none: authentication
    /// failed) and writes its RequestReceived event.
    pub fn begin(
        &self,
        req: &HttpRequest,
        id: &str,
        user: Option<&UserInfo>,
        target: Target,
    ) -> Record {
        let Some(auditor) = &self.auditor else {
            return Record(None);
        };
        let verb = match &target {
            Target::Resource(info) => info.verb.as_str().to_string(),
            Target::NonResource => req.method().as_str().to_lowercase(),
        };
        let user = user.map(user_info).unwrap_or_default();
        let mut event = Event::received(id.into(), req.uri().to_string(), verb, user);
        event.source_ips = source_ips(req);
        event.user_agent = header(req, "user-agent").unwrap_or_default().into();
        let mut long_running = false;
        if let Target::Resource(info) = target {
            event.object_ref = Some(object_ref(info));
            long_running = super::flow_control::is_long_running(info);
        }
        let decision = auditor.policy.decide(&event);
        if decision.level == Level::None {
            return Record(None);
        }
        event.level = decision.level;
        let mut active = Active {
            event,
            decision,
            backend: auditor.backend.clone(),
            long_running,
        };
        active.emit(Stage::RequestReceived);
        Record(Some(active))
    }
}

impl Record {
    /// The user the request acts as, when impersonation changed it.
    pub fn impersonated(&mut self, authenticated: &UserInfo, acting: &UserInfo) {
        if let Some(active) = &mut self.0 {
            if authenticated != acting {
                active.event.impersonated_user = Some(user_info(acting));
            }
        }
    }

    /// kube's authorization annotation.
    pub fn authorized(&mut self, allowed: bool) {
        if let Some(active) = &mut self.0 {
            let decision = if allowed { "allow" } else { "forbid" };
            active
                .event
                .annotations
                .insert("authorization.k8s.io/decision".into(), decision.into());
        }
    }

    /// At Request level and above, reads the body to record it and hands
    /// the handler an equal one.
    pub async fn request_body(
        &mut self,
        req: &HttpRequest,
        payload: web::Payload,
    ) -> Result<web::Payload, ApiError> {
        // A long-running request's body is a stream (an exec's websocket):
        // never read to its end, so never recorded.
        let recorded = |a: &&mut Active| a.event.level >= Level::Request && !a.long_running;
        let Some(active) = self.0.as_mut().filter(recorded) else {
            return Ok(payload);
        };
        let bytes = crate::routes::request::read_body(payload).await?;
        if !bytes.is_empty() {
            let content_type = header(req, "content-type");
            let object = crate::codec::decode_body(content_type, &bytes)
                .ok()
                .or_else(|| serde_json::from_slice(&bytes).ok());
            if let (Some(object), Some(target)) = (&object, &mut active.event.object_ref) {
                // A create names its object in the body.
                let meta = &object["metadata"];
                if target.name.is_empty() {
                    target.name = meta["name"].as_str().unwrap_or_default().into();
                }
            }
            active.event.request_object = object.map(|o| active.decision.trim(o));
        }
        let mut again = actix_web::dev::Payload::from(bytes);
        web::Payload::from_request(req, &mut again)
            .into_inner()
            .map_err(|e| ApiError::Internal(e.to_string()))
    }

    /// The answer: an event now for an error or a complete body; for a
    /// streamed body, ResponseStarted (long-running requests) now and
    /// ResponseComplete when the body ends.
    pub fn respond(mut self, response: HttpResponse) -> HttpResponse {
        if let (Some(active), Some(noted)) =
            (&mut self.0, response.extensions().get::<Annotations>())
        {
            active.event.annotations.extend(noted.0.clone());
        }
        response.map_body(|head, body| self.body(head.status.as_u16(), body))
    }

    /// As [`Record::respond`], for a response already built as a body.
    pub fn body(self, code: u16, body: BoxBody) -> BoxBody {
        let Some(mut active) = self.0 else {
            return body;
        };
        active.event.response_status = Some(ResponseStatus {
            code,
            ..ResponseStatus::default()
        });
        let keep = active.event.level == Level::RequestResponse && !active.long_running;
        match body.try_into_bytes() {
            Ok(bytes) => {
                active.complete(keep.then(|| bytes.clone()));
                BoxBody::new(bytes)
            }
            Err(body) => {
                if active.long_running {
                    active.emit(Stage::ResponseStarted);
                }
                BoxBody::new(Reported::new(body, keep, move |kept| active.complete(kept)))
            }
        }
    }

    /// The request failed with `err` (its Status is the answer).
    pub fn failed(self, err: &ApiError) {
        let Some(mut active) = self.0 else {
            return;
        };
        let status = err.status();
        active.event.response_status = Some(failure(&status, err.code()));
        if active.event.level == Level::RequestResponse {
            active.event.response_object = Some(status);
        }
        active.emit(Stage::ResponseComplete);
    }

    /// The handler panicked with `what`; the panic goes on to the recovery step.
    pub fn panicked(self, what: &str) {
        let Some(mut active) = self.0 else {
            return;
        };
        let err = ApiError::Internal(format!("APIServer panic'd: {what}"));
        active.event.response_status = Some(failure(&err.status(), 500));
        active.emit(Stage::Panic);
    }
}

impl Active {
    fn emit(&mut self, stage: Stage) {
        self.event.at(stage);
        if self.decision.records(stage) {
            self.backend.process(self.event.clone());
        }
    }

    fn complete(mut self, body: Option<Bytes>) {
        let object = body.and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        self.event.response_object = object.map(|o| self.decision.trim(o));
        self.event.at(Stage::ResponseComplete);
        if self.decision.records(Stage::ResponseComplete) {
            self.backend.process(self.event);
        }
    }
}

fn failure(status: &Value, code: u16) -> ResponseStatus {
    let text = |field: &str| status[field].as_str().unwrap_or_default().to_string();
    ResponseStatus {
        status: text("status"),
        message: text("message"),
        reason: text("reason"),
        code,
        ..ResponseStatus::default()
    }
}

fn user_info(user: &UserInfo) -> crate::audit::UserInfo {
    crate::audit::UserInfo {
        username: user.name.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
    }
}

fn object_ref(info: &RequestInfo) -> ObjectReference {
    // A create names no object yet (the body does).
    let name = match info.verb {
        Verb::Create if info.subresource.is_none() => None,
        _ => info.name.clone(),
    };
    ObjectReference {
        resource: info.resource.clone(),
        namespace: info.namespace.clone().unwrap_or_default(),
        name: name.unwrap_or_default(),
        api_group: info.group.clone(),
        api_version: info.version.clone(),
        subresource: info.subresource.clone().unwrap_or_default(),
    }
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// kube's source IPs: X-Forwarded-For, then X-Real-Ip, then the peer.
fn source_ips(req: &HttpRequest) -> Vec<String> {
    let mut ips: Vec<String> = header(req, "x-forwarded-for")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok())
        .map(str::to_string)
        .collect();
    let real = header(req, "x-real-ip").filter(|ip| ip.parse::<std::net::IpAddr>().is_ok());
    let peer = req.peer_addr().map(|a| a.ip().to_string());
    for ip in [real.map(str::to_string), peer].into_iter().flatten() {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}
