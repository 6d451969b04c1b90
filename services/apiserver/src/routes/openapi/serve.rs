//! The OpenAPI routes: `/openapi/v3` (the index, then one document per
//! group-version) and `/openapi/v2`.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

use super::v2::{form_asked, Form, PROTOBUF_CONTENT_TYPE};
use super::v3::custom_documents;
use crate::error::ApiError;
use crate::routes::AppState;

/// `/openapi/v3`: where each group-version's document is, with its hash.
pub async fn root(state: web::Data<AppState>) -> HttpResponse {
    let custom = custom_documents(&state.catalog);
    let paths: Map<String, Value> = state
        .openapi
        .v3
        .iter()
        .chain(custom.iter())
        .map(|(path, (_, hash))| {
            (
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
            )
        })
        .collect();
    HttpResponse::Ok().json(json!({"paths": paths}))
}

/// `/openapi/v3/<group-version>`.
pub async fn document(
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let path = path.trim_matches('/');
    let custom;
    let (body, hash) = match state.openapi.v3.get(path) {
        Some(found) => found,
        None => {
            custom = custom_documents(&state.catalog);
            custom.get(path).ok_or(ApiError::UnknownPath)?
        }
    };
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Etag", format!("\"{hash}\"")))
        .body(body.clone()))
}

/// `/openapi/v2`, as JSON or protobuf.
pub async fn v2(
    request: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Some(form) = form_asked(&request) else {
        return Err(ApiError::NotAcceptable(format!(
            "application/json, {PROTOBUF_CONTENT_TYPE}"
        )));
    };
    let built = state.openapi.v2(&state.catalog);
    let quoted = format!("\"{}\"", built.etag);
    let matches = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == quoted));
    let mut response = match matches {
        true => HttpResponse::NotModified(),
        false => HttpResponse::Ok(),
    };
    response.insert_header((header::ETAG, quoted));
    Ok(match (matches, form) {
        (true, _) => response.finish(),
        (false, Form::Json) => response
            .content_type("application/json")
            .body(built.json.clone()),
        (false, Form::Protobuf) => response
            .content_type(PROTOBUF_CONTENT_TYPE)
            .body(built.protobuf().to_vec()),
    })
}
