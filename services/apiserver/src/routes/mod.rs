//! The HTTP gateway: the routing table and the state handlers share.

pub mod aggregated;
pub mod chain;
pub mod connect;
pub mod discovery;
pub mod identity;
pub mod issuer;
pub mod json_list;
pub mod openapi;
pub mod patch_metadata;
pub mod render;
pub mod request;
pub mod request_info;
pub mod resource;
pub mod reviews;
pub mod state;
pub mod subresource;
pub mod system;
pub mod watch;

use actix_web::web;

pub use state::AppState;

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
        .route("/openapi/v2", web::get().to(openapi::v2))
        .route("/openapi/v3", web::get().to(openapi::root))
        .route("/openapi/v3/{path:.*}", web::get().to(openapi::document))
        .default_service(web::to(chain::handle));
}
