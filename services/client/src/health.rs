//! `/healthz`, `/readyz` and `/metrics` for a component binary, on a
//! small axum server: live while the process runs, ready once the
//! component says so (caches synced, leader or standing by), metrics
//! from the process-wide registry.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::error::{Error, Result};

/// The component's readiness, shared with the server.
#[derive(Clone, Debug, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    /// Not ready yet.
    pub fn new() -> Health {
        Health::default()
    }

    /// Sets whether `/readyz` answers 200.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether the component said it is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

/// The routes, for a component that serves them on a router of its own.
pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = health.is_ready();
                async move {
                    if ready {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
        .route("/metrics", get(metrics))
}

async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::encode(),
    )
}

/// Serves the routes on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    axum::serve(listener, router(health))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| Error::Serve { address, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let code = response[9..12].parse().unwrap();
        (code, response)
    }

    #[tokio::test]
    async fn ready_only_once_told_and_metrics_are_served() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let health = Health::new();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, health.clone(), async {
            let _ = stopped.await;
        }));
        // Make sure some family exists.
        let _queue = crate::queue::WorkQueue::<u8>::new("health-test");
        assert_eq!(get(port, "/healthz").await.0, 200);
        assert_eq!(get(port, "/readyz").await.0, 503);
        health.set_ready(true);
        assert_eq!(get(port, "/readyz").await.0, 200);
        let (code, body) = get(port, "/metrics").await;
        assert_eq!(code, 200);
        assert!(
            body.contains("workqueue_depth{name=\"health-test\"} 0"),
            "{body}"
        );
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
