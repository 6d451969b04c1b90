//! Panic recovery: a handler that panics answers 500 with a Status, and
//! the worker goes on serving (kube-apiserver's WithPanicRecovery).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use crate::error::ApiError;

pub async fn guard<T>(handler: impl Future<Output = Result<T, ApiError>>) -> Result<T, ApiError> {
    match AssertUnwindSafe(handler).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let what = describe(panic.as_ref());
            tracing::error!(%what, "a request handler panicked");
            Err(ApiError::Internal(format!("the server panicked: {what}")))
        }
    }
}

/// A panic's message, when it has one.
pub fn describe(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_internal_error() {
        let panicking = async {
            if true {
                panic!("boom");
            }
            Ok(())
        };
        let answer = guard(panicking).await;
        assert!(matches!(answer, Err(ApiError::Internal(m)) if m.contains("boom")));
        assert_eq!(guard(async { Ok(1) }).await.unwrap(), 1);
    }
}
