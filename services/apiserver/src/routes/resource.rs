//! The resource handler: decode the request into a request description
//! and options, send it to the resource type's actor, render the answer.

use std::time::Instant;

use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use super::render::{self, Form};
use super::request_info::{RequestInfo, Verb};
use super::{watch, AppState};
use crate::codec;
use crate::error::ApiError;
use crate::object::patch::PatchType;
use crate::registry::actor;
use crate::registry::catalog::Entry;
use crate::registry::flow::{Part, Reply};
use crate::registry::options::{parse_query, DeleteOptions, ListOptions, Query, WriteOptions};

/// Kubernetes refuses bodies over 3 MiB.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    let started = Instant::now();
    let query = parse_query(req.query_string());
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let info = RequestInfo::parse(req.method(), req.path(), watch);
    let (verb, resource) = match &info {
        Ok(i) => (i.verb.as_str(), i.resource.clone()),
        Err(_) => ("unknown", String::new()),
    };
    let span = tracing::info_span!(
        "request",
        verb,
        resource = %resource,
        path = %req.path(),
        code = tracing::field::Empty,
    );
    let response = match info {
        Ok(info) => dispatch(&req, payload, &state, &info, &query)
            .instrument(span.clone())
            .await
            .unwrap_or_else(|e| e.error_response()),
        Err(err) => err.error_response(),
    };
    let code = response.status().as_u16();
    let seconds = started.elapsed().as_secs_f64();
    span.record("code", code);
    tracing::debug!(parent: &span, elapsed_ms = seconds * 1000.0, "served");
    state.metrics.observe(verb, &resource, code, seconds);
    response
}

fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The scope and subresource rules that decide whether a path exists.
fn check_path(entry: &Entry, info: &RequestInfo) -> Result<Part, ApiError> {
    let def = entry.strategy.def();
    let part = info.part()?;
    let collection = matches!(
        info.verb,
        Verb::List | Verb::Watch | Verb::DeleteCollection | Verb::Create
    );
    if (!def.namespaced && info.namespace.is_some())
        || (def.namespaced
            && info.namespace.is_none()
            && !matches!(info.verb, Verb::List | Verb::Watch))
    {
        return Err(ApiError::UnknownPath);
    }
    let part_ok = match part {
        Part::Main => true,
        Part::Status => def.status && !collection,
        Part::Scale => def.scale && !collection,
    };
    if !part_ok {
        return Err(ApiError::UnknownPath);
    }
    if part != Part::Main && matches!(info.verb, Verb::Delete) {
        return Err(ApiError::MethodNotAllowed);
    }
    Ok(part)
}

async fn dispatch(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
) -> Result<HttpResponse, ApiError> {
    if let Some(review) = super::reviews::find(info) {
        let body = decode(req, read_body(payload).await?)?;
        return Ok(respond(
            201,
            Form::Json,
            super::reviews::answer(review, info, &body)?,
            &[],
        ));
    }
    if info.group.is_empty() && info.resource == "bindings" {
        return pod_binding(req, payload, state, info, query).await;
    }
    let entry = state
        .catalog
        .find(&info.group, &info.version, &info.resource)
        .ok_or(ApiError::UnknownPath)?;
    if let Some(sub) = info.subresource.as_deref() {
        let kubelet = entry.strategy.kubelet_subresources();
        if kubelet.iter().any(|(s, _)| *s == sub) {
            return super::kubelet::refuse(entry, info, query, sub).await;
        }
        if sub == "binding" && entry.strategy.binds() {
            return pod_binding(req, payload, state, info, query).await;
        }
    }
    let part = check_path(entry, info)?;
    let form = if part == Part::Scale {
        Form::Json
    } else {
        Form::negotiate(header(req, "accept"))?
    };
    let strategy = entry.strategy.as_ref();
    let namespace = info.namespace.clone().unwrap_or_default();
    let name = info.name.clone().unwrap_or_default();
    let actor = &entry.actor;
    match info.verb {
        Verb::Get => {
            let object = actor
                .send(actor::Get {
                    namespace,
                    name,
                    part,
                    resource_version: query
                        .get("resourceVersion")
                        .filter(|v| !v.is_empty())
                        .cloned(),
                })
                .await??;
            Ok(respond(
                200,
                form,
                render::object(strategy, form, object),
                &[],
            ))
        }
        Verb::List => {
            let options = ListOptions::parse(query)?;
            let page = actor
                .send(actor::List {
                    namespace: info.namespace.clone(),
                    options,
                })
                .await??;
            Ok(respond(200, form, render::list(strategy, form, page), &[]))
        }
        Verb::Watch if form == Form::Yaml => Err(ApiError::NotAcceptable(
            "application/json, application/json;as=Table;v=v1;g=meta.k8s.io".into(),
        )),
        Verb::Watch => {
            let options = ListOptions::parse(query)?;
            let timeout = options.timeout;
            let receiver = actor
                .send(actor::Watch {
                    namespace: info.namespace.clone(),
                    options,
                })
                .await?;
            // As kube-apiserver: a watch that cannot start for a reason of
            // its own (a bad field selector, a cache that cannot catch up)
            // is an HTTP error; a too old revision is a 200 stream with
            // one ERROR event.
            let receiver = match receiver {
                Err(err) if err.code() != 410 => return Err(err),
                other => other,
            };
            Ok(watch::respond(
                receiver,
                entry.strategy.clone(),
                form,
                timeout,
                state.metrics.clone(),
            ))
        }
        Verb::Create => {
            let body = decode(req, read_body(payload).await?)?;
            let options = WriteOptions::parse(query)?.with_user_agent(header(req, "user-agent"));
            let reply = actor
                .send(actor::Create {
                    namespace,
                    body,
                    options,
                })
                .await??;
            Ok(written(strategy, form, reply))
        }
        Verb::Update => {
            let body = decode(req, read_body(payload).await?)?;
            let options = WriteOptions::parse(query)?.with_user_agent(header(req, "user-agent"));
            let reply = actor
                .send(actor::Update {
                    namespace,
                    name,
                    part,
                    body,
                    options,
                })
                .await??;
            Ok(written(strategy, form, reply))
        }
        Verb::Patch => {
            let kind = PatchType::from_content_type(header(req, "content-type").unwrap_or(""))?;
            let bytes = read_body(payload).await?;
            // An apply patch is YAML (kubectl sends JSON, which is YAML too).
            let patch: Value = match kind {
                PatchType::Apply => serde_yaml::from_slice(&bytes)
                    .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?,
                _ => serde_json::from_slice(&bytes)
                    .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?,
            };
            let options = WriteOptions::parse(query)?.with_user_agent(header(req, "user-agent"));
            let reply = actor
                .send(actor::Patch {
                    namespace,
                    name,
                    part,
                    kind,
                    patch,
                    options,
                })
                .await??;
            Ok(written(strategy, form, reply))
        }
        Verb::Delete => {
            let bytes = read_body(payload).await?;
            let body = if bytes.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                Some(decode(req, bytes)?)
            };
            let options = DeleteOptions::parse(query, body.as_ref())?;
            let reply = actor
                .send(actor::Delete {
                    namespace,
                    name,
                    options,
                })
                .await??;
            Ok(written(strategy, form, reply))
        }
        Verb::DeleteCollection => {
            let list = ListOptions::parse(query)?;
            let options = DeleteOptions::parse(query, None)?;
            let items = actor
                .send(actor::DeleteCollection {
                    namespace: info.namespace.clone(),
                    list,
                    options,
                })
                .await??;
            let page = crate::registry::flow::Page {
                items: items.into_iter().map(std::sync::Arc::new).collect(),
                revision: 0,
                continue_token: None,
                remaining: None,
            };
            Ok(respond(200, form, render::list(strategy, form, page), &[]))
        }
    }
}

fn decode(req: &HttpRequest, bytes: Bytes) -> Result<Value, ApiError> {
    codec::decode_body(header(req, "content-type"), &bytes)
}

fn written(strategy: &dyn crate::registry::Strategy, form: Form, reply: Reply) -> HttpResponse {
    respond(
        reply.code,
        form,
        render::object(strategy, form, reply.body),
        &reply.warnings,
    )
}

fn respond(
    code: u16,
    form: Form,
    body: impl serde::Serialize,
    warnings: &[String],
) -> HttpResponse {
    let status =
        actix_web::http::StatusCode::from_u16(code).unwrap_or(actix_web::http::StatusCode::OK);
    let mut response = HttpResponse::build(status);
    let (content_type, text) = match form {
        Form::Yaml => (
            "application/yaml",
            serde_yaml::to_string(&body).unwrap_or_default(),
        ),
        _ => (
            "application/json",
            serde_json::to_string(&body).unwrap_or_default(),
        ),
    };
    response.content_type(content_type);
    for warning in warnings {
        response.append_header((
            "Warning",
            format!("299 - {}", Value::from(warning.as_str())),
        ));
    }
    response.body(text)
}

/// Reads the body, refusing more than [`MAX_BODY`] bytes.
async fn read_body(mut payload: web::Payload) -> Result<Bytes, ApiError> {
    let mut body = BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("reading the request body: {e}")))?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(ApiError::TooLarge(MAX_BODY));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// `POST pods/<name>/binding`, or the older `POST bindings` with the pod
/// named in the body: assigns the pod to a node (what a scheduler does).
async fn pod_binding(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
) -> Result<HttpResponse, ApiError> {
    let collection = info.resource == "bindings";
    let addressed = match collection {
        true => info.name.is_none() && info.subresource.is_none(),
        false => info.name.is_some(),
    };
    if info.verb != Verb::Create || info.namespace.is_none() || !addressed {
        return Err(ApiError::MethodNotAllowed);
    }
    let binding = decode(req, read_body(payload).await?)?;
    let name = match collection {
        true => crate::object::meta::name(&binding).to_string(),
        false => info.name.clone().unwrap_or_default(),
    };
    // The core type that binds (pods), for `bindings` and `<pods>/binding`.
    let pods = state
        .catalog
        .entries()
        .iter()
        .find(|e| e.strategy.def().group.is_empty() && e.strategy.binds())
        .ok_or(ApiError::UnknownPath)?;
    let status = pods
        .actor
        .send(actor::Bind {
            namespace: info.namespace.clone().unwrap_or_default(),
            name,
            binding,
            options: WriteOptions::parse(query)?,
        })
        .await??;
    Ok(respond(201, Form::Json, status, &[]))
}
