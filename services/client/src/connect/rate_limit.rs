//! Client-side rate limiting (`--kube-api-qps`, `--kube-api-burst`) as a
//! tower layer: every request a component sends through one
//! [`Connection`](super::Connection) takes a token from one shared
//! bucket, whichever identity it is sent as, as client-go's
//! `rest.Config.RateLimiter` does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use crate::rate::TokenBucket;

/// Makes [`RateLimited`] services that share one bucket.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    /// A layer drawing from `bucket`.
    pub fn new(bucket: Arc<TokenBucket>) -> RateLimitLayer {
        RateLimitLayer { bucket }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
        }
    }
}

/// A service that waits for a token before each request.
#[derive(Clone, Debug)]
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R> + Clone + Send + 'static,
    S::Future: Send,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Readiness is checked on the clone that sends, after the wait.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: R) -> Self::Future {
        let inner = self.inner.clone();
        let wait = self.bucket.reserve();
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            inner.oneshot(request).await
        })
    }
}
