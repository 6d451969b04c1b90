//! Registers metrics.k8s.io/v1beta1 with the API server's aggregator, as
//! a metrics-server deployment does: a Service without a selector in
//! kube-system, its Endpoints (this process's address and port), and the
//! APIService pointing at the Service, trusting the serving certificate's
//! CA. Applied server-side, so a restart changes only what moved.

use base64::Engine;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use super::{GROUP, VERSION};
use crate::error::Error;

pub const NAMESPACE: &str = "kube-system";
pub const SERVICE: &str = "capstan-nodes";
const MANAGER: &str = "capstan-nodes";

/// The names the serving certificate must carry for the aggregator.
pub fn service_names() -> Vec<String> {
    vec![
        format!("{SERVICE}.{NAMESPACE}.svc"),
        format!("{SERVICE}.{NAMESPACE}.svc.cluster.local"),
        "localhost".into(),
    ]
}

/// Points the aggregator at `address:port`; `ca_pem` is the CA to trust
/// (none: the APIService skips verification, and the log says so).
pub async fn register(
    client: &kube::Client,
    address: &str,
    port: u16,
    ca_pem: Option<&str>,
) -> Result<(), Error> {
    let params = PatchParams::apply(MANAGER).force();
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": SERVICE}},
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
    });
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .patch(SERVICE, &params, &Patch::Apply(service))
        .await
        .map_err(Error::api(format!("apply Service {NAMESPACE}/{SERVICE}")))?;
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
    });
    Api::<Endpoints>::namespaced(client.clone(), NAMESPACE)
        .patch(SERVICE, &params, &Patch::Apply(endpoints))
        .await
        .map_err(Error::api(format!("apply Endpoints {NAMESPACE}/{SERVICE}")))?;
    let name = format!("{VERSION}.{GROUP}");
    let mut spec = json!({
        "group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 100,
        "service": {"namespace": NAMESPACE, "name": SERVICE, "port": 443},
    });
    match ca_pem {
        Some(pem) => {
            spec["caBundle"] = base64::engine::general_purpose::STANDARD.encode(pem).into()
        }
        None => {
            tracing::warn!("no CA for the serving certificate (--metrics-ca-file): the APIService skips TLS verification");
            spec["insecureSkipTLSVerify"] = true.into();
        }
    }
    let api_service = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name}, "spec": spec,
    });
    Api::<APIService>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(api_service))
        .await
        .map_err(Error::api(format!("apply APIService {name}")))?;
    Ok(())
}
