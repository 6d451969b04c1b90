//! Strategic merge metadata for the OpenAPI documents: the
//! `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`
//! extensions the Kubernetes types declare. kubectl reads them to diff
//! lists element by element; without them it takes every list as atomic,
//! so `kubectl apply` of an unchanged Deployment would resend its
//! containers (which the server has defaulted) and report "configured".

use serde_json::{Map, Value};

/// The merge key of a list of `item` (a schema name's last segment) held
/// in field `field`, as the upstream types declare it.
fn merge_key(field: &str, item: &str) -> Option<&'static str> {
    Some(match (field, item) {
        (_, "Container" | "EphemeralContainer") => "name",
        ("volumes", "Volume") | ("env", "EnvVar") => "name",
        ("imagePullSecrets", "LocalObjectReference") => "name",
        ("resourceClaims", _) => "name",
        (_, "VolumeMount") => "mountPath",
        (_, "VolumeDevice") => "devicePath",
        (_, "ContainerPort") => "containerPort",
        (_, "ServicePort") => "port",
        (_, "OwnerReference") => "uid",
        (_, "HostAlias") => "ip",
        (_, "TopologySpreadConstraint") => "topologyKey",
        ("conditions", item) if item.ends_with("Condition") => "type",
        _ => return None,
    })
}

/// Lists of strings Kubernetes merges as sets.
fn merged_set(field: &str) -> bool {
    field == "finalizers"
}

/// Adds the extensions to every list property of every schema.
pub fn annotate(schemas: &mut Map<String, Value>) {
    for schema in schemas.values_mut() {
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, property) in properties.iter_mut() {
            annotate_property(field, property);
        }
    }
}

fn annotate_property(field: &str, property: &mut Value) {
    if property["type"] != "array" {
        return;
    }
    let item = property["items"]["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('.').next())
        .unwrap_or("")
        .to_string();
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(key) = merge_key(field, &item) {
        object.insert("x-kubernetes-patch-strategy".into(), "merge".into());
        object.insert("x-kubernetes-patch-merge-key".into(), key.into());
    } else if merged_set(field) {
        object.insert("x-kubernetes-patch-strategy".into(), "merge".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_and_ports_get_their_keys() {
        let mut schemas = Map::new();
        schemas.insert("io.k8s.api.core.v1.PodSpec".into(), json!({"properties": {
            "containers": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}},
            "tolerations": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Toleration"}}}}));
        schemas.insert("io.k8s.api.core.v1.ServiceSpec".into(), json!({"properties": {
            "ports": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.ServicePort"}}}}));
        annotate(&mut schemas);
        let pod = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(pod["containers"]["x-kubernetes-patch-merge-key"], "name");
        assert!(pod["tolerations"]
            .get("x-kubernetes-patch-strategy")
            .is_none());
        let service = &schemas["io.k8s.api.core.v1.ServiceSpec"]["properties"];
        assert_eq!(service["ports"]["x-kubernetes-patch-merge-key"], "port");
    }
}
