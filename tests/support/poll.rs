//! Waiting for a condition with a deadline instead of a fixed sleep.

use std::future::Future;
use std::time::{Duration, Instant};

const STEP: Duration = Duration::from_millis(50);

/// Calls `probe` every 50 ms until it returns `Some`, or panics with `what`
/// once `timeout` has passed.
pub fn wait_for<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    super::watchdog::waiting_for(what);
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(STEP);
    }
}

/// The async form of [`wait_for`].
pub async fn wait_for_async<T, F>(timeout: Duration, what: &str, mut probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    super::watchdog::waiting_for(what);
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(STEP).await;
    }
}
