//! The authentication reviews: `SelfSubjectReview` (who am I, as
//! `kubectl auth whoami` asks) answers with the request's user, and
//! `TokenReview` (whose is this token, as webhooks and aggregated API
//! servers ask) runs the token through the server's authenticators for
//! the audiences it names (the server's by default).

use actix_web::http::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use actix_web::{HttpMessage, HttpRequest};
use serde_json::{json, Value};

use super::chain::authentication::Credentials;
use super::request_info::RequestInfo;
use super::reviews::{self, Review};
use super::AppState;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::serviceaccount::asked_audiences;

pub const GROUP: &str = "authentication.k8s.io";

pub async fn answer(
    req: &HttpRequest,
    state: &AppState,
    review: &Review,
    info: &RequestInfo,
    body: &Value,
) -> Result<Value, ApiError> {
    let user = req
        .extensions()
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_else(UserInfo::anonymous);
    let authorizer = state.chain.authorizer.as_ref();
    let mut answered = reviews::answer(review, info, body, &user, authorizer)?;
    answered["status"] = match review.kind {
        "TokenReview" => token_review(state, &body["spec"]).await?,
        _ => json!({"userInfo": user.to_json()}),
    };
    Ok(answered)
}

async fn token_review(state: &AppState, spec: &Value) -> Result<Value, ApiError> {
    let token = spec["token"].as_str().unwrap_or("").trim();
    if token.is_empty() {
        return Err(ApiError::BadRequest("spec.token: Required value".into()));
    }
    let audiences = asked_audiences(spec, &state.chain.audiences);
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ApiError::BadRequest("spec.token: not a valid token".into()))?;
    headers.insert(AUTHORIZATION, bearer);
    let credentials = Credentials {
        headers: &headers,
        peer_certificates: &[],
        insecure: false,
        audiences: &audiences,
    };
    Ok(
        match state.chain.authenticator.authenticate(&credentials).await {
            Ok(Some(found)) if found.user != UserInfo::anonymous() => json!({
            "authenticated": true, "user": found.user.to_json(), "audiences": found.audiences}),
            _ => {
                json!({"authenticated": false, "error": "the token is not valid for these audiences, or not at all"})
            }
        },
    )
}
