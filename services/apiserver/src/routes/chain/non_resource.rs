//! The chain's guard for paths that are not resources (`/healthz`,
//! `/version`, `/api`, `/apis/apps/v1`, `/openapi/v3`, `/metrics`):
//! authentication, impersonation and authorization of the lower-case HTTP
//! method on the path, as kube-apiserver authorizes nonResourceURLs.
//! Resource paths pass straight on to [`super::handle`], which runs the
//! whole chain itself.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, ResponseError};

use super::authorization::{self, Attributes};
use super::impersonation;
use crate::error::ApiError;
use crate::routes::request_info::RequestInfo;
use crate::routes::AppState;

/// Whether kube would call `path` a resource request: under `/api/v1/` or
/// `/apis/<group>/<version>/`, with something after the version.
pub fn is_resource(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    matches!(parts.as_slice(), ["api", _, _, ..] | ["apis", _, _, _, ..])
}

pub async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let (Some(state), false) = (state, is_resource(req.path())) else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    match admit(&req, &state).await {
        Ok(()) => next
            .call(req)
            .await
            .map(ServiceResponse::map_into_left_body),
        Err(err) => Ok(req
            .into_response(err.error_response())
            .map_into_right_body()),
    }
}

async fn admit(req: &ServiceRequest, state: &AppState) -> Result<(), ApiError> {
    let chain = &state.chain;
    let user = super::authenticate(req.request(), chain).await?;
    // Impersonation is checked the same way whatever the path.
    let any = RequestInfo::parse(&actix_web::http::Method::GET, "/api/v1/namespaces", false)?;
    let user = impersonation::apply(req.headers(), user, &any, chain.authorizer.as_ref())?;
    let verb = req.method().as_str().to_lowercase();
    let attributes = Attributes {
        user: &user,
        verb: &verb,
        group: "",
        resource: "",
        subresource: None,
        namespace: None,
        name: None,
        path: Some(req.path()),
    };
    authorization::check(chain.authorizer.as_ref(), &attributes)?;
    req.extensions_mut().insert(user);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_and_health_are_not_resources() {
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/openapi/v3/api/v1",
        ] {
            assert!(!is_resource(path), "{path}");
        }
        for path in [
            "/api/v1/pods",
            "/api/v1/namespaces/a/pods",
            "/apis/apps/v1/deployments",
        ] {
            assert!(is_resource(path), "{path}");
        }
    }
}
