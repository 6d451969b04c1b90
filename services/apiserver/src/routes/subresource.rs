//! Subresources a kind serves with its own code (see
//! [`crate::registry::subresource`]): the request is checked against the
//! kind's table (a verb it lists, the object named), the body of a Create
//! subresource is read, and the kind's handler runs with the kind's handle.
//! An older collection a table names (`POST .../namespaces/ns/bindings`
//! with the object named in the body) is the same subresource.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::Value;

use super::render::respond;
use super::render::Form;
use super::request::{decode, read_body, user_of};
use super::request_info::RequestInfo;
use super::AppState;
use crate::error::ApiError;
use crate::object::meta;
use crate::registry::catalog::Entry;
use crate::registry::options::{Query, WriteOptions};
use crate::registry::requests::{self, SubresourceRequest};
use crate::registry::subresource::{Serve, Subresource};

/// The subresource `info` asks of `entry`'s kind, when the kind's own
/// code serves it.
pub fn own(entry: &Entry, info: &RequestInfo) -> Option<&'static Subresource> {
    let def = entry.strategy.def();
    let sub = def.subresource(info.subresource.as_deref()?)?;
    matches!(sub.serve, Serve::Create(_) | Serve::Connect(_)).then_some(sub)
}

/// `<objects>/<name>/<subresource>`.
pub async fn serve(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
    entry: &Entry,
    sub: &'static Subresource,
) -> Result<HttpResponse, ApiError> {
    let scoped = info.namespace.is_some() == entry.strategy.def().namespaced;
    let verb = info.verb.as_str();
    if info.name.is_none() || !scoped || !sub.verbs.contains(&verb) {
        return Err(ApiError::MethodNotAllowed);
    }
    let name = info.name.clone().unwrap_or_default();
    let asked = Asked {
        req,
        state,
        info,
        query,
    };
    match sub.serve {
        Serve::Connect(connecter) => {
            let request = asked.request(name, None)?;
            super::connect::serve(req, payload, state, entry, connecter, sub.name, request).await
        }
        _ => {
            let body = decode(req, read_body(payload).await?)?;
            call(&asked, entry, sub, name, Some(body)).await
        }
    }
}

/// `POST` to an older collection that serves a kind's subresource, with
/// the object named in the body.
pub async fn by_collection(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    info: &RequestInfo,
    query: &Query,
) -> Result<HttpResponse, ApiError> {
    let (entry, sub) = collection(state, info).ok_or(ApiError::UnknownPath)?;
    let scoped = info.namespace.is_some() == entry.strategy.def().namespaced;
    let verb = info.verb.as_str();
    let whole = info.name.is_none() && info.subresource.is_none();
    if !whole || !scoped || !sub.verbs.contains(&verb) || !matches!(sub.serve, Serve::Create(_)) {
        return Err(ApiError::MethodNotAllowed);
    }
    let body = decode(req, read_body(payload).await?)?;
    let name = meta::name(&body).to_string();
    let asked = Asked {
        req,
        state,
        info,
        query,
    };
    call(&asked, &entry, sub, name, Some(body)).await
}

/// The kind of `info`'s group and version whose table names `info`'s
/// resource as an older collection of one of its subresources.
fn collection(state: &AppState, info: &RequestInfo) -> Option<(Entry, &'static Subresource)> {
    state.catalog.entries().iter().find_map(|entry| {
        let def = entry.strategy.def();
        if def.group != info.group || def.version != info.version {
            return None;
        }
        let sub = def
            .subresources
            .iter()
            .find(|s| s.collection == Some(info.resource.as_str()))?;
        Some((entry.clone(), sub))
    })
}

/// The request, as the chain passed it on.
struct Asked<'a> {
    req: &'a HttpRequest,
    state: &'a AppState,
    info: &'a RequestInfo,
    query: &'a Query,
}

impl Asked<'_> {
    /// The request to the kind's own code, as `user_of` the request.
    fn request(&self, name: String, body: Option<Value>) -> Result<SubresourceRequest, ApiError> {
        let mut options = match body.is_some() {
            true => WriteOptions::parse(self.query)?,
            false => WriteOptions::default(),
        };
        options.authorizer = Some(self.state.chain.authorizer.clone());
        Ok(SubresourceRequest {
            namespace: self.info.namespace.clone().unwrap_or_default(),
            name,
            verb: self.info.verb.as_str(),
            body,
            query: self.query.clone(),
            pairs: web::Query::<Vec<(String, String)>>::from_query(self.req.query_string())
                .map(web::Query::into_inner)
                .unwrap_or_default(),
            options: options.with_user(user_of(self.req)),
            services: self.state.services.clone(),
        })
    }
}

/// Runs the handler of `sub` for the object `name` with `entry`'s handle.
async fn call(
    asked: &Asked<'_>,
    entry: &Entry,
    sub: &'static Subresource,
    name: String,
    body: Option<Value>,
) -> Result<HttpResponse, ApiError> {
    let Serve::Create(handler) = sub.serve else {
        return Err(ApiError::UnknownPath);
    };
    let request = asked.request(name, body)?;
    let answer = entry.call(requests::Serve { handler, request }).await?;
    Ok(respond(answer.code, Form::Json, answer.body, &[]))
}
