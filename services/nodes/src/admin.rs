//! The plain-HTTP endpoint of the process (loopback by default): health
//! and metrics (capstan-client's routes), and the admin routes that stop
//! and start nodes:
//!
//! - `GET /nodes`: every node and whether it runs.
//! - `POST /nodes/{name}/stop`, `POST /nodes/{name}/start`: one node.
//! - `POST /nodes/stop`, `POST /nodes/start`: every node.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use capstan_client::health::{self, Health};
use serde_json::json;

use crate::runtime::control::Control;

pub fn router(health: Health, control: Control) -> Router {
    let admin = Router::new()
        .route("/nodes", get(list))
        .route("/nodes/stop", post(|s| all(s, false)))
        .route("/nodes/start", post(|s| all(s, true)))
        .route("/nodes/{name}/stop", post(|s, p| one(s, p, false)))
        .route("/nodes/{name}/start", post(|s, p| one(s, p, true)))
        .with_state(control);
    health::router(health).merge(admin)
}

async fn list(State(control): State<Control>) -> Json<serde_json::Value> {
    let nodes: Vec<_> = control
        .fleet
        .all()
        .iter()
        .map(|n| json!({"name": n.name, "running": n.is_running()}))
        .collect();
    Json(json!({"nodes": nodes}))
}

async fn all(State(control): State<Control>, running: bool) -> Json<serde_json::Value> {
    control.set_all_running(running);
    Json(json!({"running": control.running().len(), "nodes": control.fleet.all().len()}))
}

async fn one(State(control): State<Control>, Path(name): Path<String>, running: bool) -> Response {
    match control.set_running(&name, running) {
        Some(changed) => {
            Json(json!({"name": name, "running": running, "changed": changed})).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            format!("no node {name:?} is simulated here\n"),
        )
            .into_response(),
    }
}
