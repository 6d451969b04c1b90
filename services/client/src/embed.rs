//! A component embedded in another process, as k3s embeds kube's
//! controller manager and scheduler: a thread of its own with its own
//! tokio runtime, so its work never competes with the host's runtime,
//! and a stop the host asks for (or implies by dropping the handle).

use std::future::Future;
use std::thread::JoinHandle;

pub use tokio_util::sync::CancellationToken;

/// Worker threads of an embedded component's runtime: the host process
/// (an API server) keeps the rest of the cores.
const WORKER_THREADS: usize = 2;

/// A running embedded component. Stopping it (or dropping it) cancels its
/// token and waits for its thread to end.
pub struct Embedded {
    stop: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl Embedded {
    /// Starts `component` on a thread (and runtime threads) named after it,
    /// running `run(stop)` to its end; `stop` is cancelled when the host
    /// stops or drops the handle.
    pub fn start<F, Fut>(component: &str, run: F) -> std::io::Result<Embedded>
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let name = component.to_string();
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(WORKER_THREADS)
                    .thread_name(&name)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => return tracing::error!(%err, component = %name, "runtime"),
                };
                runtime.block_on(run(token));
            })?;
        Ok(Embedded {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the component and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn stopping_cancels_the_token_and_joins_the_thread() {
        let ended = Arc::new(AtomicBool::new(false));
        let seen = ended.clone();
        let embedded = Embedded::start("test-component", move |stop| async move {
            assert_eq!(std::thread::current().name(), Some("test-component"));
            stop.cancelled().await;
            seen.store(true, Ordering::SeqCst);
        })
        .unwrap();
        embedded.stop();
        assert!(ended.load(Ordering::SeqCst));
    }

    #[test]
    fn dropping_stops_it_too() {
        let ended = Arc::new(AtomicBool::new(false));
        let seen = ended.clone();
        drop(
            Embedded::start("test-component", move |stop| async move {
                stop.cancelled().await;
                seen.store(true, Ordering::SeqCst);
            })
            .unwrap(),
        );
        assert!(ended.load(Ordering::SeqCst));
    }
}
