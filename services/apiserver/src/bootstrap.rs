//! Objects every cluster has from the start besides the system
//! namespaces: the `kubernetes` service in `default`, on the first address
//! of the service range, with endpoints at this API server (what in-cluster
//! clients find through KUBERNETES_SERVICE_HOST), and the two system
//! PriorityClasses.

use serde_json::{json, Value};

use crate::error::ApiError;
use crate::registry::kinds::core::services::ranges as service_ranges;
use crate::registry::options::WriteOptions;
use crate::registry::{requests, Catalog};

fn kubernetes_service(port: u16) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "kubernetes", "namespace": "default",
                        "labels": {"component": "apiserver", "provider": "kubernetes"}},
           "spec": {"type": "ClusterIP", "clusterIP": service_ranges::first_ip(),
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}})
}

fn kubernetes_endpoints(address: &str, port: u16) -> Value {
    json!({"apiVersion": "v1", "kind": "Endpoints",
           "metadata": {"name": "kubernetes", "namespace": "default",
                        "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
           "subsets": [{"addresses": [{"ip": address}],
                        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]})
}

/// Creates the `kubernetes` service and its endpoints unless they exist
/// (another API server on the same store may have made them).
pub async fn ensure_default_service(
    catalog: &Catalog,
    address: &str,
    port: u16,
) -> Result<(), ApiError> {
    let address = match address {
        "0.0.0.0" | "" => "127.0.0.1",
        other => other,
    };
    create_unless_exists(catalog, "services", kubernetes_service(port)).await?;
    create_unless_exists(catalog, "endpoints", kubernetes_endpoints(address, port)).await
}

/// `system-node-critical` and `system-cluster-critical`, unless they exist.
pub async fn ensure_priority_classes(catalog: &Catalog) -> Result<(), ApiError> {
    for (name, value, description) in crate::admission::plugins::SYSTEM_CLASSES {
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description});
        create_in(
            catalog,
            ("scheduling.k8s.io", "v1", "priorityclasses"),
            "",
            class,
        )
        .await?;
    }
    Ok(())
}

async fn create_unless_exists(
    catalog: &Catalog,
    resource: &str,
    body: Value,
) -> Result<(), ApiError> {
    create_in(catalog, ("", "v1", resource), "default", body).await
}

async fn create_in(
    catalog: &Catalog,
    (group, version, resource): (&str, &str, &str),
    namespace: &str,
    body: Value,
) -> Result<(), ApiError> {
    let Some(entry) = catalog.find(group, version, resource) else {
        return Ok(());
    };
    let create = requests::Create {
        namespace: namespace.into(),
        body,
        options: WriteOptions::by("capstan-apiserver"),
    };
    match entry.call(create).await {
        Ok(_) | Err(ApiError::AlreadyExists(_)) => Ok(()),
        Err(err) => Err(err),
    }
}
