//! The aggregator (kube-aggregator's job, in front of the rest of the
//! server): APIService objects say which server answers each API
//! group/version. Local ones are this server's own groups; the others
//! name a Service, and every request under their `/apis/<group>/<version>`
//! is proxied, after this server's authentication and authorization, to
//! an extension API server with the user in X-Remote-* headers and the
//! front-proxy client certificate. Their groups and resources join
//! discovery while they are available.
//!
//! - registration.rs: an APIService as routing needs it; the Local ones;
//! - resolve.rs: Service → address (ExternalName, else its Endpoints);
//! - tls.rs: trusting the backend, presenting the front-proxy certificate;
//! - headers.rs: the proxied request's headers;
//! - proxy.rs: one request sent, its answer streamed back;
//! - availability.rs: the controller that probes backends, writes the
//!   `Available` condition and keeps their discovery documents;
//! - discovery.rs: merging those into `/apis` and aggregated discovery;
//! - settings.rs: the front-proxy and requestheader flags;
//! - autoregister.rs: the Local APIServices of this server's own groups;
//! - authentication_configmap.rs: kube-system/extension-apiserver-authentication.

pub mod authentication_configmap;
pub mod autoregister;
pub mod availability;
pub mod discovery;
pub mod headers;
pub mod proxy;
pub mod registration;
pub mod resolve;
pub mod settings;
pub mod tls;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;

use crate::admission::objects::Objects;
use registration::Registration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabel {
    pub name: String,
}

/// kube's aggregator_unavailable_apiservice gauge, kept by the
/// availability controller.
#[derive(Clone, Default)]
pub struct AggregatorMetrics {
    pub unavailable: Family<NameLabel, Gauge>,
}

/// What the request path and discovery read of the APIServices, kept
/// current by the availability controller.
pub struct Aggregator {
    registrations: RwLock<Arc<Vec<Registration>>>,
    /// APIService name → the backend's APIResourceList.
    documents: RwLock<HashMap<String, Value>>,
    pub proxy: proxy::Proxy,
    pub objects: Arc<dyn Objects>,
    pub metrics: AggregatorMetrics,
}

impl Aggregator {
    pub fn new(
        proxy: proxy::Proxy,
        objects: Arc<dyn Objects>,
        metrics: AggregatorMetrics,
    ) -> Aggregator {
        Aggregator {
            registrations: RwLock::new(Arc::new(Vec::new())),
            documents: RwLock::new(HashMap::new()),
            proxy,
            objects,
            metrics,
        }
    }

    /// Every APIService, as last seen.
    pub fn registrations(&self) -> Arc<Vec<Registration>> {
        self.registrations
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The new routing table; the unavailable gauge follows it (an
    /// APIService gone leaves it).
    pub fn set_registrations(&self, all: Vec<Registration>) {
        let gauge = &self.metrics.unavailable;
        let old = self.registrations();
        for gone in old.iter().filter(|r| !all.iter().any(|a| a.name == r.name)) {
            gauge.remove(&NameLabel {
                name: gone.name.clone(),
            });
        }
        for r in &all {
            let label = NameLabel {
                name: r.name.clone(),
            };
            gauge.get_or_create(&label).set(i64::from(!r.available));
        }
        *self
            .registrations
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(all);
    }

    /// The APIService that sends `group/version` to another server, if
    /// one does (a Local one, or none, leaves it to this server).
    pub fn remote(&self, group: &str, version: &str) -> Option<Registration> {
        let all = self.registrations();
        let found = all
            .iter()
            .find(|r| r.group == group && r.version == version && r.service.is_some());
        found.cloned()
    }

    /// The backend's resource list of an available APIService.
    pub fn document(&self, name: &str) -> Option<Value> {
        let documents = self.documents.read().unwrap_or_else(|p| p.into_inner());
        documents.get(name).cloned()
    }

    pub fn set_document(&self, name: &str, document: Option<Value>) {
        let mut documents = self.documents.write().unwrap_or_else(|p| p.into_inner());
        match document {
            Some(document) => documents.insert(name.to_string(), document),
            None => documents.remove(name),
        };
    }

    /// The available remote APIServices with their documents.
    pub fn available(&self) -> Vec<(Registration, Value)> {
        let all = self.registrations();
        let remote = all.iter().filter(|r| r.service.is_some() && r.available);
        remote
            .filter_map(|r| Some((r.clone(), self.document(&r.name)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::plugins::testing::Memory;

    #[test]
    fn the_unavailable_gauge_follows_the_routing_table() {
        let metrics = AggregatorMetrics::default();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("unavailable", "help", metrics.unavailable.clone());
        let proxy = proxy::Proxy::new(tls::Configs::new(None));
        let aggregator = Aggregator::new(proxy, Arc::new(Memory::default()), metrics);
        let obj = serde_json::json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "a", "name": "b"}}});
        let down = Registration::of(&obj).unwrap();
        aggregator.set_registrations(vec![down]);
        let render = |registry: &prometheus_client::registry::Registry| {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
            out
        };
        assert!(
            render(&registry).contains(r#"unavailable{name="v1beta1.metrics.k8s.io"} 1"#),
            "{}",
            render(&registry)
        );
        aggregator.set_registrations(Vec::new());
        assert!(!render(&registry).contains("v1beta1.metrics.k8s.io"));
    }
}
