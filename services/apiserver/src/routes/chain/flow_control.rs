//! API Priority and Fairness as a step of the chain: after
//! authentication and impersonation (a request is classified by who it
//! acts as) and before authorization, as in kube. Each request gets
//! leave to run from `crate::flowcontrol`, waits its turn in its flow's
//! queues, or is answered 429 with a Retry-After; every classified
//! response names its FlowSchema and PriorityLevelConfiguration UIDs.
//! A watch holds its seat only until it has started; exec, attach, log,
//! proxy and port-forward are not limited at all.
//! kube's `apiserver_current_inflight_requests` and
//! `apiserver_dropped_requests_total` keep counting, by request kind.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use parking_lot::RwLock;
use prometheus_client::metrics::gauge::Gauge;

use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::flowcontrol::admission::Identity;
use crate::flowcontrol::{Admitted, FlowControl, ListShape, RequestDigest, ResourceTarget, Target};
use crate::metrics::{InFlightMetrics, KindLabel};
use crate::registry::options::{ListOptions, Query};
use crate::registry::requests;
use crate::registry::Catalog;
use crate::routes::request_info::{RequestInfo, Verb};

const FLOW_SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";
/// Subresources kube serves as long-running streams.
const LONG_RUNNING: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];
/// How often the object counts the work estimator reads are refreshed
/// (kube: every minute).
const COUNT_PERIOD: Duration = Duration::from_secs(10);

/// Objects stored per (group, resource).
pub type ObjectCounts = Arc<RwLock<HashMap<(String, String), u64>>>;

pub struct FlowControlStep {
    pub engine: Arc<FlowControl>,
    pub counts: ObjectCounts,
    in_flight: InFlightMetrics,
}

/// Leave to run; a resource request is counted in flight meanwhile.
pub struct Held {
    admitted: Admitted,
    gauge: Option<Gauge>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.dec();
        }
    }
}

impl Held {
    /// Names the schema and level in the response.
    pub fn mark(&self, headers: &mut HeaderMap) {
        mark(
            headers,
            &self.admitted.flow_schema,
            &self.admitted.priority_level,
        );
    }
}

/// Whether kube serves the request as a long-running one.
pub fn is_long_running(info: &RequestInfo) -> bool {
    info.verb == Verb::Watch
        || info
            .subresource
            .as_deref()
            .is_some_and(|sub| LONG_RUNNING.contains(&sub))
}

impl FlowControlStep {
    pub fn new(engine: Arc<FlowControl>, in_flight: InFlightMetrics) -> FlowControlStep {
        FlowControlStep {
            engine,
            counts: ObjectCounts::default(),
            in_flight,
        }
    }

    /// Leave for a resource request; None for one kube does not limit;
    /// the 429 to send when it is rejected.
    pub async fn admit(
        &self,
        info: &RequestInfo,
        query: &Query,
        user: &UserInfo,
    ) -> Result<Option<Held>, HttpResponse> {
        if info.verb != Verb::Watch && is_long_running(info) {
            return Ok(None);
        }
        let digest = resource_digest(info, user);
        let shape = self.shape(info, query);
        let kind = match info.verb {
            Verb::Get | Verb::List | Verb::Watch => "readOnly",
            _ => "mutating",
        };
        self.held(&digest, &shape, Some(kind)).await.map(Some)
    }

    /// Leave for a request to a non-resource path.
    pub async fn admit_path(
        &self,
        method: &str,
        path: &str,
        user: &UserInfo,
    ) -> Result<Held, HttpResponse> {
        let digest = RequestDigest {
            user: user.name.clone(),
            groups: user.groups.clone(),
            verb: method.to_lowercase(),
            target: Target::NonResource {
                path: path.to_string(),
            },
        };
        // kube's in-flight gauges count resource requests only.
        self.held(&digest, &ListShape::default(), None).await
    }

    /// Leave from the engine; the request counted in flight (as `kind`,
    /// for a resource request) or refused with a 429.
    async fn held(
        &self,
        digest: &RequestDigest,
        shape: &ListShape,
        kind: Option<&'static str>,
    ) -> Result<Held, HttpResponse> {
        let label = kind.map(|request_kind| KindLabel { request_kind });
        match self.engine.admit(digest, shape).await {
            Ok(admitted) => {
                let gauge = label.map(|l| self.in_flight.current.get_or_create(&l).clone());
                gauge.iter().for_each(|g| {
                    g.inc();
                });
                Ok(Held { admitted, gauge })
            }
            Err(rejected) => {
                if let Some(label) = label {
                    self.in_flight.dropped.get_or_create(&label).inc();
                }
                let too_many = ApiError::TooManyRequests(rejected.retry_after);
                let mut response = too_many.error_response();
                let headers = response.headers_mut();
                mark(headers, &rejected.flow_schema, &rejected.priority_level);
                Err(response)
            }
        }
    }

    /// What a list's cost depends on.
    fn shape(&self, info: &RequestInfo, query: &Query) -> ListShape {
        let param = |name: &str| query.get(name).map(String::as_str).unwrap_or("");
        let key = (info.group.clone(), info.resource.clone());
        let version = param("resourceVersion");
        ListShape {
            object_count: self.counts.read().get(&key).copied(),
            limit: param("limit").parse().ok(),
            filtered: !param("labelSelector").is_empty() || !param("fieldSelector").is_empty(),
            // kube serves a list from its cache unless it must read the
            // store: no resourceVersion, an exact one, or a continuation.
            from_cache: !version.is_empty()
                && param("resourceVersionMatch") != "Exact"
                && param("continue").is_empty(),
            initial_events: param("sendInitialEvents") == "true",
        }
    }

    /// Refreshes the object counts every [`COUNT_PERIOD`], forever.
    pub async fn count_objects(counts: ObjectCounts, catalog: Arc<Catalog>) {
        loop {
            let mut fresh = HashMap::new();
            for entry in catalog.primary_entries() {
                // From the watch cache at once: a count, not a read.
                let options = ListOptions {
                    resource_version: Some("0".into()),
                    ..ListOptions::default()
                };
                let list = requests::List {
                    namespace: None,
                    options,
                };
                let Ok(page) = entry.call(list).await else {
                    continue;
                };
                let objects = page.items;
                let def = entry.strategy.def();
                fresh.insert(
                    (def.group.to_string(), def.resource.to_string()),
                    objects.len() as u64,
                );
            }
            *counts.write() = fresh;
            tokio::time::sleep(COUNT_PERIOD).await;
        }
    }
}

/// The engine's description of a resource request. A namespace's own
/// requests are in that namespace, as kube has it.
fn resource_digest(info: &RequestInfo, user: &UserInfo) -> RequestDigest {
    let mut namespace = info.namespace.clone().unwrap_or_default();
    if info.group.is_empty() && info.resource == "namespaces" && namespace.is_empty() {
        namespace = info.name.clone().unwrap_or_default();
    }
    RequestDigest {
        user: user.name.clone(),
        groups: user.groups.clone(),
        verb: info.verb.as_str().to_string(),
        target: Target::Resource(ResourceTarget {
            api_group: info.group.clone(),
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            namespace,
            name: info.name.clone(),
        }),
    }
}

fn mark(headers: &mut HeaderMap, flow_schema: &Identity, priority_level: &Identity) {
    for (name, identity) in [
        (FLOW_SCHEMA_UID, flow_schema),
        (PRIORITY_LEVEL_UID, priority_level),
    ] {
        let uid = identity.uid.as_deref().unwrap_or_default();
        if let Ok(value) = HeaderValue::from_str(uid) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flowcontrol::controller::DEFAULT_WAIT_LIMIT;
    use crate::flowcontrol::metrics::FlowControlMetrics;
    use actix_web::http::Method;

    fn info(method: Method, path: &str, watch: bool) -> RequestInfo {
        RequestInfo::parse(&method, path, watch).unwrap()
    }

    fn step(limit: u32) -> FlowControlStep {
        let engine = FlowControl::new(limit, DEFAULT_WAIT_LIMIT, FlowControlMetrics::new());
        FlowControlStep::new(Arc::new(engine), InFlightMetrics::default())
    }

    #[actix_rt::test]
    async fn over_the_limit_a_request_gets_a_429_that_names_its_schema() {
        // Only the mandatory levels: the catch-all rejects past its seats.
        let step = step(5);
        let alice = UserInfo::named("alice", &["system:authenticated"]);
        let pods = info(Method::GET, "/api/v1/namespaces/a/pods", false);
        let query = Query::new();
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(step.admit(&pods, &query, &alice).await.unwrap().unwrap());
        }
        let refused = step.admit(&pods, &query, &alice).await.err().unwrap();
        assert_eq!(refused.status().as_u16(), 429);
        assert_eq!(refused.headers().get("retry-after").unwrap(), "1");
        assert!(refused.headers().contains_key(FLOW_SCHEMA_UID));
        let kind = KindLabel {
            request_kind: "readOnly",
        };
        assert_eq!(step.in_flight.dropped.get_or_create(&kind).get(), 1);
        assert_eq!(step.in_flight.current.get_or_create(&kind).get(), 5);
        // Logs are not limited; the superuser is exempt.
        let log = info(Method::GET, "/api/v1/namespaces/a/pods/p/log", false);
        assert!(step.admit(&log, &query, &alice).await.unwrap().is_none());
        let admin = UserInfo::named("admin", &["system:masters"]);
        assert!(step.admit(&pods, &query, &admin).await.is_ok());
        drop(held);
        assert_eq!(step.in_flight.current.get_or_create(&kind).get(), 0);
    }

    #[test]
    fn requests_are_described_as_kube_classifies_them() {
        let user = UserInfo::named("bob", &["g"]);
        let namespace = info(Method::DELETE, "/api/v1/namespaces/team", false);
        let digest = resource_digest(&namespace, &user);
        assert_eq!(digest.namespace(), "team");
        assert_eq!(digest.verb, "delete");
        let status = info(
            Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/d/status",
            false,
        );
        let Target::Resource(target) = resource_digest(&status, &user).target else {
            panic!()
        };
        assert_eq!(
            (target.api_group.as_str(), target.subresource.as_deref()),
            ("apps", Some("status"))
        );
        let step = step(600);
        step.counts
            .write()
            .insert((String::new(), "pods".into()), 30_000);
        let query: Query = [("limit".to_string(), "500".to_string())].into();
        let shape = step.shape(&info(Method::GET, "/api/v1/pods", false), &query);
        assert_eq!(
            (shape.object_count, shape.limit, shape.from_cache),
            (Some(30_000), Some(500), false)
        );
    }
}
