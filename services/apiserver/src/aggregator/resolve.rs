//! Where an APIService's requests go, as kube-apiserver's aggregator
//! resolves them with `--enable-aggregator-routing` (there is no
//! kube-proxy to reach a clusterIP): an ExternalName Service is its name
//! and the APIService's port; any other Service is one of its Endpoints'
//! addresses, on the endpoint port named as the Service port. TLS checks
//! the name kube checks, `<service>.<namespace>.svc`.

use serde_json::Value;

use super::registration::ServiceRef;
use crate::admission::objects::{Freshness, Objects, ENDPOINTS, SERVICES};
use crate::admission::webhook::endpoint::{endpoint_address, service_port_name};

/// Why a service has no address; the variants are the availability
/// condition's reasons.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    #[error("service/{name} in \"{namespace}\" is not present")]
    ServiceNotFound { namespace: String, name: String },
    #[error("service/{name} in \"{namespace}\" is not listening on port {port}")]
    PortNotFound {
        namespace: String,
        name: String,
        port: u16,
    },
    #[error("endpoints for service/{name} in \"{namespace}\" have no addresses with port name {port_name:?}")]
    MissingEndpoints {
        namespace: String,
        name: String,
        port_name: String,
    },
    #[error("{0}")]
    Lookup(String),
}

impl ResolveError {
    /// The `Available` condition's reason kube gives for it.
    pub fn reason(&self) -> &'static str {
        match self {
            ResolveError::ServiceNotFound { .. } => "ServiceNotFound",
            ResolveError::PortNotFound { .. } => "ServicePortError",
            ResolveError::MissingEndpoints { .. } => "MissingEndpoints",
            ResolveError::Lookup(_) => "ServiceAccessError",
        }
    }
}

/// Where to connect and which name the certificate must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    /// `host:port`.
    pub address: String,
    pub server_name: String,
}

pub async fn resolve(service: &ServiceRef, objects: &dyn Objects) -> Result<Backend, ResolveError> {
    let (namespace, name) = (service.namespace.as_str(), service.name.as_str());
    let lookup = |e: crate::admission::objects::LookupError| ResolveError::Lookup(e.to_string());
    let found = objects.get(SERVICES, namespace, name, Freshness::Cached);
    let svc = found
        .await
        .map_err(lookup)?
        .ok_or_else(|| ResolveError::ServiceNotFound {
            namespace: namespace.into(),
            name: name.into(),
        })?;
    let server_name = format!("{name}.{namespace}.svc");
    if svc["spec"]["type"] == "ExternalName" {
        let host = svc["spec"]["externalName"].as_str().unwrap_or("");
        return Ok(Backend {
            address: format!("{host}:{}", service.port),
            server_name,
        });
    }
    let port_name =
        service_port_name(&svc, service.port.into()).ok_or(ResolveError::PortNotFound {
            namespace: namespace.into(),
            name: name.into(),
            port: service.port,
        })?;
    let missing = || ResolveError::MissingEndpoints {
        namespace: namespace.into(),
        name: name.into(),
        port_name: port_name.clone(),
    };
    let found = objects.get(ENDPOINTS, namespace, name, Freshness::Cached);
    let endpoints: Value = found.await.map_err(lookup)?.ok_or_else(missing)?;
    let address = endpoint_address(&endpoints, &port_name).ok_or_else(missing)?;
    Ok(Backend {
        address: address.to_string(),
        server_name,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::plugins::testing::Memory;

    fn metrics() -> ServiceRef {
        ServiceRef {
            namespace: "kube-system".into(),
            name: "metrics".into(),
            port: 443,
        }
    }

    #[tokio::test]
    async fn a_service_resolves_through_its_endpoints_by_port_name() {
        let objects = Memory::default();
        let err = resolve(&metrics(), &objects).await.unwrap_err();
        assert_eq!(err.reason(), "ServiceNotFound");
        objects.put(
            SERVICES,
            json!({"metadata": {"namespace": "kube-system", "name": "metrics"},
                   "spec": {"ports": [{"name": "https", "port": 443}]}}),
        );
        let err = resolve(&metrics(), &objects).await.unwrap_err();
        assert_eq!(err.reason(), "MissingEndpoints");
        objects.put(
            ENDPOINTS,
            json!({"metadata": {"namespace": "kube-system", "name": "metrics"},
                   "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                "ports": [{"name": "https", "port": 9443}]}]}),
        );
        let backend = resolve(&metrics(), &objects).await.unwrap();
        assert_eq!(backend.address, "127.0.0.1:9443");
        assert_eq!(backend.server_name, "metrics.kube-system.svc");
    }

    #[tokio::test]
    async fn an_external_name_service_is_its_name_on_the_apiservice_port() {
        let objects = Memory::default();
        objects.put(
            SERVICES,
            json!({"metadata": {"namespace": "kube-system", "name": "metrics"},
                   "spec": {"type": "ExternalName", "externalName": "metrics.example.com"}}),
        );
        let backend = resolve(&metrics(), &objects).await.unwrap();
        assert_eq!(backend.address, "metrics.example.com:443");
    }
}
