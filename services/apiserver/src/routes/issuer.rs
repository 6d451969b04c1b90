//! The service-account issuer discovery documents: OpenID Connect
//! discovery at `/.well-known/openid-configuration` and the token keys at
//! `/openid/v1/jwks`, so that others can verify this server's tokens.

use actix_web::{web, HttpResponse};

use super::AppState;
use crate::error::ApiError;

pub async fn configuration(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let issuer = state.issuer.as_ref().ok_or(ApiError::UnknownPath)?;
    Ok(HttpResponse::Ok().json(issuer.discovery()))
}

pub async fn jwks(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let issuer = state.issuer.as_ref().ok_or(ApiError::UnknownPath)?;
    Ok(HttpResponse::Ok()
        .content_type("application/jwk-set+json")
        .body(issuer.jwks().to_string()))
}
