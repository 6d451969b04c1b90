//! The chain's guard for paths that are not resources (`/healthz`,
//! `/version`, `/api`, `/apis/apps/v1`, `/openapi/v3`, `/metrics`):
//! authentication, impersonation and authorization of the lower-case HTTP
//! method on the path, as kube-apiserver authorizes nonResourceURLs,
//! priority and fairness, and their audit record (the verb is the
//! method).
//! Resource paths go straight to [`super::handle`], which runs the whole
//! chain itself, without the router.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, FromRequest, HttpMessage, ResponseError};

use super::authorization;
use super::{audit, impersonation};
use crate::auth::{Attributes, UserInfo};
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
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let Some(state) = state else {
        return next
            .call(req)
            .await
            .map(ServiceResponse::map_into_boxed_body);
    };
    if is_resource(req.path()) {
        // No route matches a resource path: straight to the chain, past
        // the router's patterns (tried in turn, a measurable share of a
        // node heartbeat's cost).
        let (request, mut payload) = req.into_parts();
        let body = web::Payload::from_request(&request, &mut payload).await?;
        let response = super::handle(request.clone(), body, state).await;
        return Ok(ServiceResponse::new(request, response));
    }
    let audit_id = audit::request_id(req.request());
    let chain = &state.chain;
    let user = super::authenticate(req.request(), chain).await;
    let mut record = chain.audit.begin(
        req.request(),
        &audit_id,
        user.as_ref().ok(),
        audit::Target::NonResource,
    );
    let admitted = user.and_then(|user| admit(&req, &state, user, &mut record));
    let mut response = match admitted {
        Ok(user) => {
            let flow_control = &chain.flow_control;
            match flow_control
                .admit_path(req.method().as_str(), req.path(), &user)
                .await
            {
                Ok(held) => {
                    let mut served = next.call(req).await?.map_into_boxed_body();
                    held.mark(served.headers_mut());
                    served.map_body(|head, body| record.body(head.status.as_u16(), body))
                }
                Err(too_many) => {
                    let served = req.into_response(too_many);
                    served.map_body(|head, body| record.body(head.status.as_u16(), body))
                }
            }
        }
        Err(err) => {
            record.failed(&err);
            req.into_response(err.error_response())
        }
    };
    audit::echo_id(response.headers_mut(), &audit_id);
    Ok(response)
}

/// Impersonation and authorization of the method on the path; the user
/// the request acts as.
fn admit(
    req: &ServiceRequest,
    state: &AppState,
    authenticated: UserInfo,
    record: &mut audit::Record,
) -> Result<UserInfo, ApiError> {
    let chain = &state.chain;
    // Impersonation is checked the same way whatever the path.
    let any = RequestInfo::parse(&actix_web::http::Method::GET, "/api/v1/namespaces", false)?;
    let user = impersonation::apply(
        req.headers(),
        authenticated.clone(),
        &any,
        chain.authorizer.as_ref(),
    )?;
    record.impersonated(&authenticated, &user);
    let verb = req.method().as_str().to_lowercase();
    let attributes = Attributes::for_path(&user, &verb, req.path());
    let allowed = authorization::check(chain.authorizer.as_ref(), &attributes);
    record.authorized(allowed.is_ok());
    allowed?;
    req.extensions_mut().insert(user.clone());
    Ok(user)
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
