//! N workers over one queue, as a controller's `Run(workers)` starts
//! them: each takes a key, calls the handler, forgets the key on success
//! and requeues it rate-limited on an error or a panic. A panic in one
//! call is caught and logged; the other keys and workers go on.

use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::task::JoinSet;

use super::WorkQueue;

/// Runs `workers` workers calling `handler` for each key until the queue
/// is shut down and drained (stop them with [`WorkQueue::shutdown`], e.g.
/// when leadership is lost). A handler's `Err` or panic requeues the key
/// with the queue's rate limiter.
pub async fn run_workers<T, F, Fut, E>(queue: WorkQueue<T>, workers: usize, handler: F)
where
    T: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let handler = Arc::new(handler);
    let mut set = JoinSet::new();
    for _ in 0..workers.max(1) {
        set.spawn(worker(queue.clone(), handler.clone()));
    }
    while set.join_next().await.is_some() {}
}

async fn worker<T, F, Fut, E>(queue: WorkQueue<T>, handler: Arc<F>)
where
    T: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    while let Some(key) = queue.get().await {
        let call = AssertUnwindSafe(async { handler(key.clone()).await }).catch_unwind();
        match call.await {
            Ok(Ok(())) => queue.forget(&key),
            Ok(Err(error)) => {
                tracing::warn!(queue = queue.name(), ?key, %error, retries = queue.num_requeues(&key), "sync failed; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(queue = queue.name(), ?key, panic = %message, "sync panicked; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
