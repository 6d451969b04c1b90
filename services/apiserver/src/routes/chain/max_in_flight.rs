//! Max in flight: at most so many reads and so many writes are served at
//! once; more are refused with 429 and a Retry-After, as kube-apiserver's
//! `--max-requests-inflight` (400) and `--max-mutating-requests-inflight`
//! (200) do. Watches are long-running and not counted.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::routes::request_info::{RequestInfo, Verb};

pub struct MaxInFlight {
    reads: Arc<Semaphore>,
    writes: Arc<Semaphore>,
}

impl Default for MaxInFlight {
    fn default() -> Self {
        MaxInFlight::new(400, 200)
    }
}

impl MaxInFlight {
    pub fn new(reads: usize, writes: usize) -> MaxInFlight {
        MaxInFlight {
            reads: Arc::new(Semaphore::new(reads)),
            writes: Arc::new(Semaphore::new(writes)),
        }
    }

    /// A permit held while the request is served; none for a watch.
    pub fn admit(&self, info: &RequestInfo) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        let pool = match info.verb {
            Verb::Watch => return Ok(None),
            Verb::Get | Verb::List => &self.reads,
            _ => &self.writes,
        };
        pool.clone()
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| ApiError::TooManyRequests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    fn info(method: Method, watch: bool) -> RequestInfo {
        RequestInfo::parse(&method, "/api/v1/namespaces/a/pods", watch).unwrap()
    }

    #[test]
    fn requests_over_the_limit_are_refused_until_one_ends() {
        let limits = MaxInFlight::new(1, 1);
        let read = limits.admit(&info(Method::GET, false)).unwrap();
        let refused = limits.admit(&info(Method::GET, false));
        assert!(matches!(refused, Err(ApiError::TooManyRequests)));
        assert_eq!(ApiError::TooManyRequests.code(), 429);
        // Writes have their own budget, and watches are not counted.
        assert!(limits.admit(&info(Method::POST, false)).unwrap().is_some());
        assert!(limits.admit(&info(Method::GET, true)).unwrap().is_none());
        drop(read);
        assert!(limits.admit(&info(Method::GET, false)).is_ok());
    }
}
