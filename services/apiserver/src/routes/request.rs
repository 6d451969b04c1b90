//! What every handler reads from a request: a header, the body (bounded,
//! decoded by its content type), and the user the handler chain put in
//! its extensions.

use actix_web::{web, HttpMessage, HttpRequest};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::Value;

use crate::auth::UserInfo;
use crate::codec;
use crate::error::ApiError;

/// Kubernetes refuses bodies over 3 MiB.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Reads the body, refusing more than [`MAX_BODY`] bytes.
pub async fn read_body(mut payload: web::Payload) -> Result<Bytes, ApiError> {
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

pub fn decode(req: &HttpRequest, bytes: Bytes) -> Result<Value, ApiError> {
    codec::decode_body(header(req, "content-type"), &bytes)
}

/// The user the handler chain put in the request's extensions (anonymous
/// when it put none), for admission and the strategies' checks.
pub fn user_of(req: &HttpRequest) -> UserInfo {
    req.extensions()
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(UserInfo::anonymous)
}
