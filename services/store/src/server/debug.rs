//! `/debug/failpoints/...` on the client URLs, only with
//! `--experimental-enable-failpoints` (see `failpoints.rs`).
//!
//! - `GET /debug/failpoints/raft-log-sync-delay` answers
//!   `{"delayMs":N,"syncsWaiting":K}`: the delay in force and how many raft
//!   log syncs are held by it right now.
//! - `PUT /debug/failpoints/raft-log-sync-delay` with a body of whole
//!   milliseconds (`250`; `0` removes the delay) sets it and answers like GET.
//! - `GET /debug/failpoints/put-error-every` answers `{"every":N}`; `PUT`
//!   with a body of a whole number N (`0`: off) makes every Nth put this
//!   member answers fail with `Internal` after it was applied.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;

use crate::failpoints::Failpoints;

pub const SYNC_DELAY_PATH: &str = "/debug/failpoints/raft-log-sync-delay";
pub const PUT_ERROR_PATH: &str = "/debug/failpoints/put-error-every";

pub fn add_routes(router: Router, failpoints: Option<Arc<Failpoints>>) -> Router {
    let Some(failpoints) = failpoints else {
        // Said plainly, rather than left to the gRPC fallback.
        return router
            .route(SYNC_DELAY_PATH, any(disabled))
            .route(PUT_ERROR_PATH, any(disabled));
    };
    let debug = Router::new()
        .route(SYNC_DELAY_PATH, get(show_sync_delay).put(set_sync_delay))
        .route(PUT_ERROR_PATH, get(show_put_error).put(set_put_error))
        .with_state(failpoints);
    router.merge(debug)
}

async fn disabled() -> Response {
    (
        StatusCode::NOT_FOUND,
        "failpoints are disabled: start the store with --experimental-enable-failpoints\n",
    )
        .into_response()
}

async fn show_sync_delay(State(failpoints): State<Arc<Failpoints>>) -> Response {
    sync_delay_json(&failpoints)
}

async fn set_sync_delay(State(failpoints): State<Arc<Failpoints>>, body: String) -> Response {
    let unit = " of milliseconds";
    with_whole_number(&body, "raft-log-sync-delay", unit, |millis| {
        failpoints.set_sync_delay(millis);
        sync_delay_json(&failpoints)
    })
}

/// Hands the whole number a failpoint's body gives to `set`, or answers
/// 400 saying what was wanted.
fn with_whole_number(
    body: &str,
    failpoint: &str,
    unit: &str,
    set: impl FnOnce(u64) -> Response,
) -> Response {
    match body.trim().parse::<u64>() {
        Ok(value) => {
            tracing::warn!(failpoint, value, "failpoint set");
            set(value)
        }
        Err(_) => {
            let why = format!("{failpoint}: the body must be a whole number{unit}, got {body:?}\n");
            (StatusCode::BAD_REQUEST, why).into_response()
        }
    }
}

fn sync_delay_json(failpoints: &Failpoints) -> Response {
    let state = failpoints.sync_delay();
    let body = format!(
        "{{\"delayMs\":{},\"syncsWaiting\":{}}}",
        state.millis, state.waiting
    );
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn show_put_error(State(failpoints): State<Arc<Failpoints>>) -> Response {
    put_error_json(&failpoints)
}

async fn set_put_error(State(failpoints): State<Arc<Failpoints>>, body: String) -> Response {
    with_whole_number(&body, "put-error-every", "", |every| {
        failpoints.set_put_error_every(every);
        put_error_json(&failpoints)
    })
}

fn put_error_json(failpoints: &Failpoints) -> Response {
    let body = format!("{{\"every\":{}}}", failpoints.put_error_every());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
