//! The HTTP gateway: the routing table and the state handlers share.

pub mod aggregated;
pub mod chain;
pub mod discovery;
pub mod identity;
pub mod issuer;
pub mod json_list;
pub mod openapi;
pub mod openapi_v2;
mod openapi_v2_proto;
pub mod patch_metadata;
pub mod render;
pub mod request_info;
pub mod resource;
pub mod reviews;
pub mod subresource;
pub mod system;
pub mod watch;

use std::sync::Arc;

use actix_web::web;

use crate::metrics::Metrics;
use crate::registry::Catalog;
use crate::storage::Store;

pub struct AppState {
    pub catalog: Arc<Catalog>,
    pub metrics: Arc<Metrics>,
    pub openapi: openapi::Documents,
    /// For readiness: can the store be reached?
    pub store: Store,
    /// The steps before the REST handler (see [`chain`]).
    pub chain: chain::Chain,
    /// Issues and verifies service-account tokens, when configured.
    pub issuer: Option<Arc<crate::serviceaccount::Issuer>>,
    /// What the kinds' own subresource code may use.
    pub services: Arc<crate::registry::subresource::Services>,
    /// The APIServices: which group/versions other servers answer.
    pub aggregator: Arc<crate::aggregator::Aggregator>,
}

pub fn configure(config: &mut web::ServiceConfig) {
    config
        .route("/version", web::get().to(system::version))
        .route("/version/", web::get().to(system::version))
        .route("/healthz", web::get().to(system::healthz))
        .route("/livez", web::get().to(system::healthz))
        .route("/readyz", web::get().to(system::readyz))
        .route("/metrics", web::get().to(system::metrics))
        .route("/api", web::get().to(discovery::core))
        .route("/api/", web::get().to(discovery::core))
        .route("/apis", web::get().to(discovery::groups))
        .route("/apis/", web::get().to(discovery::groups))
        .route("/api/{version}", web::get().to(discovery::core_resources))
        .route("/apis/{group}", web::get().to(discovery::group))
        .route(
            "/apis/{group}/{version}",
            web::get().to(discovery::group_resources),
        )
        .route(
            "/.well-known/openid-configuration",
            web::get().to(issuer::configuration),
        )
        .route("/openid/v1/jwks", web::get().to(issuer::jwks))
        .route("/openapi/v2", web::get().to(openapi_v2::document))
        .route("/openapi/v3", web::get().to(openapi::root))
        .route("/openapi/v3/{path:.*}", web::get().to(openapi::document))
        .default_service(web::to(chain::handle));
}
