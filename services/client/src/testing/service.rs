//! The in-memory API as a tower service: decode, log the call, inject
//! any failure the test asked for, then read, write or watch.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::deletes;
use super::objects::key;
use super::request::{ApiRequest, Verb};
use super::scale;
use super::selectors::Selectors;
use super::status::ApiError;
use super::watch::{self, WatchSpec};
use super::writes::{self, collection};
use super::{Call, State};
use crate::connect::ResponseBody;

/// Answers one request against `state`.
pub(super) fn handle(
    state: &mut State,
    request: &Request<()>,
    body: &[u8],
) -> Response<ResponseBody> {
    let Some(api) = ApiRequest::parse(request) else {
        return error(&ApiError::not_found_path());
    };
    state.calls.push(Call::of(&api, body));
    if let Some(failure) = state.faults.take(api.verb, &api.resource_path()) {
        return error(&failure);
    }
    let answer = match api.verb {
        Verb::Get => get(state, &api),
        Verb::List => list(state, &api),
        Verb::Watch => return watch(state, &api),
        Verb::Create => write(state, &api, body),
        Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection => {
            write(state, &api, body)
        }
    };
    match answer {
        Ok((code, value)) => json_response(code, &value),
        Err(failure) => error(&failure),
    }
}

fn get(state: &State, api: &ApiRequest) -> Result<(u16, Value), ApiError> {
    if api.subresource.as_deref() == Some("scale") {
        return scale::get(&state.objects, api);
    }
    if !matches!(api.subresource.as_deref(), None | Some("status")) {
        return Err(ApiError::not_found_path());
    }
    let name = api.name.clone().unwrap_or_default();
    state
        .objects
        .get(&collection(api), &key(api.namespace.as_deref(), &name))
        .map(|o| (200, o.clone()))
        .ok_or_else(|| ApiError::not_found(&api.qualified_resource(), &name))
}

fn list(state: &State, api: &ApiRequest) -> Result<(u16, Value), ApiError> {
    let selectors = Selectors::parse(api.param("labelSelector"), api.param("fieldSelector"))
        .map_err(ApiError::bad_request)?;
    let items = state
        .objects
        .list(&collection(api), api.namespace.as_deref(), &selectors);
    let kind = items
        .first()
        .and_then(|o| o["kind"].as_str())
        .map_or_else(|| "List".to_string(), |k| format!("{k}List"));
    Ok((
        200,
        json!({
            "kind": kind,
            "apiVersion": api_version(api),
            "metadata": {"resourceVersion": state.objects.resource_version().to_string()},
            "items": items,
        }),
    ))
}

fn api_version(api: &ApiRequest) -> String {
    if api.group.is_empty() {
        api.version.clone()
    } else {
        format!("{}/{}", api.group, api.version)
    }
}

fn write(state: &mut State, api: &ApiRequest, body: &[u8]) -> Result<(u16, Value), ApiError> {
    let objects = &mut state.objects;
    let sub = api.subresource.as_deref();
    let pods = api.group.is_empty() && api.resource == "pods";
    let result = match (api.verb, sub) {
        (Verb::Create, None) => writes::create(objects, api, body),
        (Verb::Create, Some("binding")) if pods => deletes::bind(objects, api, body),
        (Verb::Create, Some("eviction")) if pods => deletes::evict(objects, api, body),
        (Verb::Update | Verb::Patch, Some("scale")) => scale::write(objects, api, body),
        (Verb::Update, None | Some("status")) => writes::update(objects, api, body),
        (Verb::Patch, None | Some("status")) => writes::patch(objects, api, body),
        (Verb::Delete, None) => deletes::delete(objects, api, body),
        (Verb::DeleteCollection, None) => deletes::delete_collection(objects, api),
        _ => Err(ApiError::not_found_path()),
    };
    let (code, value, changes) = result?;
    for change in &changes {
        state.watchers.notify(change);
    }
    Ok((code, value))
}

fn watch(state: &mut State, api: &ApiRequest) -> Response<ResponseBody> {
    let selectors = match Selectors::parse(api.param("labelSelector"), api.param("fieldSelector")) {
        Ok(s) => s,
        Err(message) => return error(&ApiError::bad_request(message)),
    };
    let collection = collection(api);
    let current = state.objects.resource_version();
    let from = api.param("resourceVersion").filter(|v| *v != "0");
    let mut spec = WatchSpec {
        namespace: api.namespace.clone(),
        selectors,
        delay: state
            .watch_delays
            .get(&api.resource)
            .copied()
            .unwrap_or_default(),
        bookmarks: (api.param("allowWatchBookmarks") == Some("true"))
            .then_some(state.bookmark_interval),
        timeout: api
            .param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map(Duration::from_secs),
        kind: String::new(),
        api_version: api_version(api),
        start_version: current,
    };
    let (initial, synthetic) = match from {
        // No version: the current state as ADDED events, then changes.
        None => {
            let objects =
                state
                    .objects
                    .list(&collection, api.namespace.as_deref(), &spec.selectors);
            let added = objects
                .into_iter()
                .map(|o| json!({"type": "ADDED", "object": o}))
                .collect();
            (Vec::new(), added)
        }
        Some(version) => {
            let Ok(since) = version.parse::<u64>() else {
                return error(&ApiError::bad_request(format!(
                    "invalid resource version: {version}"
                )));
            };
            match state.objects.changes_since(&collection, since) {
                Ok(changes) => {
                    spec.start_version = since;
                    (changes, Vec::new())
                }
                Err(oldest) => {
                    let gone =
                        ApiError::gone(format!("too old resource version: {since} ({oldest})"));
                    return streaming(watch::error_body(gone.body()));
                }
            }
        }
    };
    spec.kind = state.objects.kind(&collection);
    let body = watch::open(&mut state.watchers, collection, spec, initial, synthetic);
    streaming(body)
}

fn streaming(body: ResponseBody) -> Response<ResponseBody> {
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body)
        .expect("a valid response")
}

fn json_response(code: u16, value: &Value) -> Response<ResponseBody> {
    let body = http_body_util::Full::new(Bytes::from(value.to_string()))
        .map_err(|never| match never {})
        .boxed_unsync();
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(body)
        .expect("a valid response")
}

fn error(failure: &ApiError) -> Response<ResponseBody> {
    json_response(failure.code, &failure.body())
}
