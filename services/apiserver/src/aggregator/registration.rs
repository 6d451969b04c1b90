//! What the aggregator knows of one APIService: which group/version it
//! routes, where to, how to trust it, and whether it is available; and
//! the "Local" APIServices kube-apiserver registers for its own groups.

use serde_json::{json, Value};

/// Where an APIService's requests go.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

/// One APIService, as routing and discovery need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub name: String,
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
    /// None for a Local APIService (served by this server).
    pub service: Option<ServiceRef>,
    /// PEM, decoded from the base64 `caBundle`.
    pub ca_bundle: Vec<u8>,
    pub insecure_skip_verify: bool,
    /// `Available` is True in its status.
    pub available: bool,
}

impl Registration {
    /// The registration of a stored APIService (None if it is malformed,
    /// which validation does not let in).
    pub fn of(obj: &Value) -> Option<Registration> {
        use base64::Engine;
        let spec = &obj["spec"];
        let service = &spec["service"];
        let service = service.is_object().then(|| ServiceRef {
            namespace: service["namespace"].as_str().unwrap_or("").to_string(),
            name: service["name"].as_str().unwrap_or("").to_string(),
            port: service["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        });
        let ca = spec["caBundle"].as_str().unwrap_or("");
        let engine = base64::engine::general_purpose::STANDARD;
        let conditions = obj["status"]["conditions"].as_array();
        let available = conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Available" && c["status"] == "True");
        Some(Registration {
            name: obj["metadata"]["name"].as_str()?.to_string(),
            group: spec["group"].as_str().unwrap_or("").to_string(),
            version: spec["version"].as_str()?.to_string(),
            group_priority: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
            service,
            ca_bundle: engine.decode(ca).unwrap_or_default(),
            insecure_skip_verify: spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false),
            available,
        })
    }

    /// `/apis/<group>/<version>`, the path its discovery is read from.
    pub fn discovery_path(&self) -> String {
        match self.group.as_str() {
            "" => format!("/api/{}", self.version),
            group => format!("/apis/{group}/{}", self.version),
        }
    }
}

/// kube-apiserver's priorities for its own group/versions (group,
/// version): the higher, the earlier in discovery. Other groups are
/// custom resources', which kube's CRD registration gives 1000 and 100.
pub fn local_priority(group: &str, version: &str) -> (i64, i64) {
    let group_priority = match group {
        "" | "apiregistration.k8s.io" => return (18000, 1),
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        _ => return (1000, 100),
    };
    let version_priority = match version {
        "v2" => 30,
        "v1" => 15,
        v if v.contains("beta") => 12,
        _ => 9,
    };
    (group_priority, version_priority)
}

/// The Local APIService kube-apiserver registers for one of its own
/// group/versions.
pub fn local_apiservice(group: &str, version: &str) -> Value {
    let (group_priority, version_priority) = local_priority(group, version);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{version}.{group}")},
        "spec": {"group": group, "version": version,
                 "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_apiservice_is_read_with_kubes_defaults() {
        let obj = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "caBundle": "Zm9v",
                     "groupPriorityMinimum": 100, "versionPriority": 100,
                     "service": {"namespace": "kube-system", "name": "metrics-server"}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let r = Registration::of(&obj).unwrap();
        assert_eq!(
            r.service,
            Some(ServiceRef {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: 443
            })
        );
        assert_eq!(r.ca_bundle, b"foo");
        assert!(r.available);
        assert_eq!(r.discovery_path(), "/apis/metrics.k8s.io/v1beta1");
    }

    #[test]
    fn local_apiservices_are_named_version_dot_group() {
        let core = local_apiservice("", "v1");
        assert_eq!(core["metadata"]["name"], "v1.");
        assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
        let apps = Registration::of(&local_apiservice("apps", "v1")).unwrap();
        assert_eq!(
            (apps.name.as_str(), apps.group_priority, apps.service),
            ("v1.apps", 17800, None)
        );
        assert_eq!(local_priority("autoscaling", "v2"), (17500, 30));
        assert_eq!(local_priority("example.com", "v1"), (1000, 100));
    }
}
