//! Where a webhook is. `clientConfig.url` is used as written. For
//! `clientConfig.service` there is no kube-proxy to make the Service's
//! clusterIP reachable, so the call goes straight to one of the Service's
//! Endpoints addresses (as kube-apiserver does with
//! `--enable-aggregator-routing`), on the endpoint port that has the
//! Service port's name; TLS still checks the name kube checks,
//! `<service>.<namespace>.svc`.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::admissionregistration::v1::{ServiceReference, WebhookClientConfig};
use serde_json::Value;

use super::super::objects::{Freshness, Objects, ENDPOINTS, SERVICES};

/// Why a webhook's address could not be found.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// One call's destination.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What to connect to: `host:port`.
    pub address: String,
    /// The name the server's certificate must hold.
    pub server_name: String,
    /// The request's path and query (kube adds `?timeout=<n>s`).
    pub path: String,
    /// The URL as messages show it.
    pub url: String,
}

/// The target of `config` for a call that may last `timeout_seconds`.
pub async fn resolve(
    config: &WebhookClientConfig,
    timeout_seconds: u64,
    objects: &dyn Objects,
) -> Result<Target, ResolveError> {
    match (&config.url, &config.service) {
        (Some(url), _) => from_url(url, timeout_seconds),
        (None, Some(service)) => from_service(service, timeout_seconds, objects).await,
        (None, None) => Err(ResolveError("no url or service in clientConfig".into())),
    }
}

fn with_timeout(path: &str, timeout_seconds: u64) -> String {
    let path = if path.is_empty() { "/" } else { path };
    format!("{path}?timeout={timeout_seconds}s")
}

fn from_url(url: &str, timeout_seconds: u64) -> Result<Target, ResolveError> {
    let bad = |why: &str| ResolveError(format!("invalid url {url:?}: {why}"));
    let uri: hyper::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("https") {
        return Err(bad("only https is allowed"));
    }
    let host = uri.host().ok_or_else(|| bad("no host"))?;
    let port = uri.port_u16().unwrap_or(443);
    let path = with_timeout(uri.path(), timeout_seconds);
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
    Ok(Target {
        address: format!("{host}:{port}"),
        server_name: host.trim_start_matches('[').trim_end_matches(']').into(),
        url: format!("https://{authority}{path}"),
        path,
    })
}

async fn from_service(
    service: &ServiceReference,
    timeout_seconds: u64,
    objects: &dyn Objects,
) -> Result<Target, ResolveError> {
    let (namespace, name) = (service.namespace.as_str(), service.name.as_str());
    let port = service.port.unwrap_or(443);
    let missing = |what: &str| ResolveError(format!("{what} \"{namespace}/{name}\" not found"));
    let found = objects
        .get(SERVICES, namespace, name, Freshness::Cached)
        .await;
    let svc = found.map_err(lookup)?.ok_or_else(|| missing("service"))?;
    let port_name = service_port_name(&svc, port).ok_or_else(|| {
        ResolveError(format!("service \"{namespace}/{name}\" has no port {port}"))
    })?;
    let found = objects
        .get(ENDPOINTS, namespace, name, Freshness::Cached)
        .await;
    let endpoints = found.map_err(lookup)?.ok_or_else(|| missing("endpoints"))?;
    let address = endpoint_address(&endpoints, &port_name).ok_or_else(|| {
        ResolveError(format!(
            "service \"{namespace}/{name}\" has no ready endpoints"
        ))
    })?;
    let path = with_timeout(service.path.as_deref().unwrap_or("/"), timeout_seconds);
    let server_name = format!("{name}.{namespace}.svc");
    Ok(Target {
        address: address.to_string(),
        url: format!("https://{server_name}:{port}{path}"),
        server_name,
        path,
    })
}

fn lookup(err: super::super::objects::LookupError) -> ResolveError {
    ResolveError(err.to_string())
}

/// The name of the Service port `port` (empty for an unnamed one).
pub(crate) fn service_port_name(service: &Value, port: i32) -> Option<String> {
    let ports = service["spec"]["ports"].as_array()?;
    let found = ports
        .iter()
        .find(|p| p["port"].as_i64() == Some(port.into()))?;
    Some(found["name"].as_str().unwrap_or("").to_string())
}

/// The first ready address of the Endpoints with the port named
/// `port_name`.
pub(crate) fn endpoint_address(endpoints: &Value, port_name: &str) -> Option<SocketAddr> {
    let subsets = endpoints["subsets"].as_array()?;
    subsets.iter().find_map(|subset| {
        let ports = subset["ports"].as_array()?;
        let port = ports
            .iter()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)?["port"]
            .as_u64()?;
        let addresses = subset["addresses"].as_array()?;
        let ip: IpAddr = addresses
            .iter()
            .find_map(|a| a["ip"].as_str()?.parse().ok())?;
        Some(SocketAddr::new(ip, u16::try_from(port).ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::plugins::testing::Memory;
    use super::*;
    use serde_json::json;

    fn config(value: Value) -> WebhookClientConfig {
        serde_json::from_value(value).unwrap()
    }

    #[tokio::test]
    async fn urls_are_used_as_written_with_kubes_timeout_query() {
        let objects = Memory::default();
        let url = config(json!({"url": "https://127.0.0.1:8443/deny"}));
        let target = resolve(&url, 10, &objects).await.unwrap();
        assert_eq!(target.address, "127.0.0.1:8443");
        assert_eq!(target.server_name, "127.0.0.1");
        assert_eq!(target.path, "/deny?timeout=10s");
        assert_eq!(target.url, "https://127.0.0.1:8443/deny?timeout=10s");
        let bare = config(json!({"url": "https://hooks.example.com"}));
        let bare = resolve(&bare, 3, &objects).await.unwrap();
        assert_eq!(
            (bare.address.as_str(), bare.path.as_str()),
            ("hooks.example.com:443", "/?timeout=3s")
        );
    }

    #[tokio::test]
    async fn services_go_to_their_endpoints_by_port_name() {
        let objects = Memory::default();
        let reference = config(
            json!({"service": {"namespace": "hooks", "name": "deny", "port": 8443, "path": "/v"}}),
        );
        let err = resolve(&reference, 10, &objects).await.unwrap_err();
        assert_eq!(err.to_string(), "service \"hooks/deny\" not found");
        objects.put(
            SERVICES,
            json!({"metadata": {"namespace": "hooks", "name": "deny"},
            "spec": {"ports": [{"name": "other", "port": 80}, {"name": "https", "port": 8443}]}}),
        );
        objects.put(ENDPOINTS, json!({"metadata": {"namespace": "hooks", "name": "deny"},
            "subsets": [{"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "other", "port": 8080}]},
                        {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 9443}]}]}));
        let target = resolve(&reference, 10, &objects).await.unwrap();
        assert_eq!(target.address, "127.0.0.1:9443");
        assert_eq!(target.server_name, "deny.hooks.svc");
        assert_eq!(target.url, "https://deny.hooks.svc:8443/v?timeout=10s");
        let no_port = config(json!({"service": {"namespace": "hooks", "name": "deny", "port": 1}}));
        let err = resolve(&no_port, 10, &objects).await.unwrap_err();
        assert_eq!(err.to_string(), "service \"hooks/deny\" has no port 1");
    }
}
