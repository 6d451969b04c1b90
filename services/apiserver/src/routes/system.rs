//! /version, health, readiness and metrics.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use serde_json::json;

use super::AppState;

/// kubectl's dispatcher picks its client by the minor version here.
pub async fn version() -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-capstan", "gitCommit": env!("CARGO_PKG_VERSION"),
        "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z", "goVersion": "rust",
        "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    }))
}

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

/// Ready when the store answers a read within a second.
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    match tokio::time::timeout(Duration::from_secs(1), state.store.current_revision()).await {
        Ok(Ok(_)) => HttpResponse::Ok().content_type("text/plain").body("ok"),
        _ => HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("[-]etcd failed: store unreachable\nreadyz check failed"),
    }
}

/// The server's own families, then those of the components running in
/// this process (the controller manager's workqueues, the scheduler's
/// queue): they report into the client machinery's registry and have no
/// port of their own when embedded.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let own = state.metrics.render();
    let mut body = own.strip_suffix("# EOF\n").unwrap_or(&own).to_string();
    body.push_str(&capstan_client::metrics::encode());
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(body)
}
