//! Plain HTTP endpoints on the client port: `/metrics`, and the health
//! checks etcd users probe (`/health`, `/livez`, `/readyz`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::context::Context;

pub fn add_routes(router: Router, ctx: Arc<Context>) -> Router {
    let http = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/readyz", get(health))
        .route("/livez", get(live))
        .with_state(ctx);
    router.merge(http)
}

async fn metrics(State(ctx): State<Arc<Context>>) -> impl IntoResponse {
    let status = ctx.raft.status();
    let gauges = &ctx.metrics.state;
    gauges.revision.set(ctx.mvcc.current_revision());
    gauges.compact_revision.set(ctx.mvcc.compact_revision());
    gauges.raft_term.set(status.term() as i64);
    gauges
        .raft_applied_index
        .set(status.applied.load(Ordering::Acquire) as i64);
    gauges
        .raft_commit_index
        .set(status.commit.load(Ordering::Acquire) as i64);
    gauges.is_leader.set(status.is_leader() as i64);
    gauges.has_leader.set((status.leader() != 0) as i64);
    gauges.watchers.set(ctx.hub.watcher_count() as i64);
    gauges
        .db_size_bytes
        .set(ctx.mvcc.backend().size_on_disk() as i64);
    gauges.leases.set(ctx.lessor.lock().ids().len() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        ctx.metrics.encode(),
    )
}

/// Healthy when a leader is known and a linearizable read goes through,
/// which is what etcd's `/health` checks.
async fn health(State(ctx): State<Arc<Context>>) -> impl IntoResponse {
    let healthy = ctx.raft.status().leader() != 0 && ctx.raft.read_barrier().await.is_ok();
    let code = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = format!("{{\"health\":\"{healthy}\"}}");
    (code, [(header::CONTENT_TYPE, "application/json")], body)
}

async fn live() -> impl IntoResponse {
    (StatusCode::OK, "ok")
}
