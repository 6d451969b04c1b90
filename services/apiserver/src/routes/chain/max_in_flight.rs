//! Max in flight: at most so many reads and so many writes are served at
//! once; more are refused with 429, `Retry-After: 1` and kube's message,
//! as kube-apiserver's `--max-requests-inflight` (400) and
//! `--max-mutating-requests-inflight` (200) do; 0 is no limit.
//! Long-running requests (watches; exec, attach, proxy, log and
//! port-forward subresources) are not counted, and `system:masters` is
//! never refused (kube's superuser must always get an answer).

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::UserInfo;
use crate::error::ApiError;
pub use crate::metrics::{InFlightMetrics, KindLabel};
use crate::routes::request_info::{RequestInfo, Verb};

/// kube's superuser group, exempt from the limits.
const MASTERS: &str = "system:masters";

/// Subresources kube serves as long-running streams.
const LONG_RUNNING: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];

struct Pool {
    kind: KindLabel,
    /// None: no limit.
    slots: Option<Arc<Semaphore>>,
}

pub struct MaxInFlight {
    reads: Pool,
    writes: Pool,
    metrics: InFlightMetrics,
}

/// Held while a counted request is served.
pub struct Permit {
    _slot: Option<OwnedSemaphorePermit>,
    gauge: Gauge,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Default for MaxInFlight {
    fn default() -> Self {
        MaxInFlight::new(400, 200, InFlightMetrics::default())
    }
}

/// Whether kube would leave the request out of the count.
pub fn is_long_running(info: &RequestInfo) -> bool {
    info.verb == Verb::Watch
        || info
            .subresource
            .as_deref()
            .is_some_and(|sub| LONG_RUNNING.contains(&sub))
}

impl MaxInFlight {
    pub fn new(reads: usize, writes: usize, metrics: InFlightMetrics) -> MaxInFlight {
        let pool = |limit: usize, kind| Pool {
            kind: KindLabel { request_kind: kind },
            slots: (limit > 0).then(|| Arc::new(Semaphore::new(limit))),
        };
        MaxInFlight {
            reads: pool(reads, "readOnly"),
            writes: pool(writes, "mutating"),
            metrics,
        }
    }

    /// A permit held while `user`'s request is served; none for a
    /// long-running one.
    pub fn admit(&self, info: &RequestInfo, user: &UserInfo) -> Result<Option<Permit>, ApiError> {
        if is_long_running(info) {
            return Ok(None);
        }
        let pool = match info.verb {
            Verb::Get | Verb::List => &self.reads,
            _ => &self.writes,
        };
        let slot = match &pool.slots {
            None => None,
            Some(slots) => match slots.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) if user.groups.iter().any(|g| g == MASTERS) => None,
                Err(_) => {
                    self.metrics.dropped.get_or_create(&pool.kind).inc();
                    return Err(ApiError::TooManyRequests);
                }
            },
        };
        let gauge = self.metrics.current.get_or_create(&pool.kind).clone();
        gauge.inc();
        Ok(Some(Permit { _slot: slot, gauge }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::Method;

    fn info(method: Method, path: &str, watch: bool) -> RequestInfo {
        RequestInfo::parse(&method, path, watch).unwrap()
    }

    fn pods(method: Method, watch: bool) -> RequestInfo {
        info(method, "/api/v1/namespaces/a/pods", watch)
    }

    #[test]
    fn requests_over_the_limit_are_refused_until_one_ends() {
        let metrics = InFlightMetrics::default();
        let limits = MaxInFlight::new(1, 1, metrics.clone());
        let alice = UserInfo::named("alice", &["dev"]);
        let read = limits.admit(&pods(Method::GET, false), &alice).unwrap();
        let refused = limits.admit(&pods(Method::GET, false), &alice);
        assert!(matches!(refused, Err(ApiError::TooManyRequests)));
        assert_eq!(ApiError::TooManyRequests.code(), 429);
        let kind = |k| KindLabel { request_kind: k };
        assert_eq!(metrics.dropped.get_or_create(&kind("readOnly")).get(), 1);
        assert_eq!(metrics.current.get_or_create(&kind("readOnly")).get(), 1);
        // Writes have their own budget; watches and logs are not counted.
        let write = limits.admit(&pods(Method::POST, false), &alice).unwrap();
        assert!(write.is_some());
        assert!(limits
            .admit(&pods(Method::GET, true), &alice)
            .unwrap()
            .is_none());
        let log = info(Method::GET, "/api/v1/namespaces/a/pods/p/log", false);
        assert!(limits.admit(&log, &alice).unwrap().is_none());
        // The superuser is always answered.
        let admin = UserInfo::named("admin", &["system:masters"]);
        assert!(limits.admit(&pods(Method::GET, false), &admin).is_ok());
        drop(read);
        assert_eq!(metrics.current.get_or_create(&kind("readOnly")).get(), 0);
        assert!(limits.admit(&pods(Method::GET, false), &alice).is_ok());
    }

    #[test]
    fn zero_is_no_limit() {
        let limits = MaxInFlight::new(0, 0, InFlightMetrics::default());
        let alice = UserInfo::named("alice", &[]);
        let held: Vec<_> = (0..1000)
            .map(|_| limits.admit(&pods(Method::POST, false), &alice).unwrap())
            .collect();
        assert_eq!(held.len(), 1000);
    }
}
