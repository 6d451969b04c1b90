//! Where a value sits in its type, which decides how server-side apply
//! merges and owns it: built-in types by field name (the rules named
//! below), custom resources by their structural schema's
//! `x-kubernetes-list-type` (`atomic`, `set`, `map` with
//! `x-kubernetes-list-map-keys`) and `x-kubernetes-map-type` (`atomic`,
//! `granular`). Without a mark, as kube deduces it, a custom resource's
//! lists are atomic and its maps granular; its `metadata` is the
//! built-in ObjectMeta.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::object::strategic;

#[derive(Debug, Clone, Copy, Default)]
pub enum Shape<'a> {
    /// A built-in type, or ObjectMeta anywhere.
    #[default]
    Builtin,
    /// A custom resource's root schema.
    Root(&'a JSONSchemaProps),
    /// A schema node under it (None: not described, such as under
    /// `x-kubernetes-preserve-unknown-fields`).
    Schema(Option<&'a JSONSchemaProps>),
}

impl<'a> Shape<'a> {
    /// The shape of member `name` of this map.
    pub fn member(self, name: &str) -> Shape<'a> {
        let node = match self {
            Shape::Builtin => return Shape::Builtin,
            Shape::Root(_) if name == "metadata" => return Shape::Builtin,
            Shape::Root(node) => Some(node),
            Shape::Schema(node) => node,
        };
        Shape::Schema(node.and_then(|n| {
            let named = n.properties.as_ref().and_then(|p| p.get(name));
            named.or(match &n.additional_properties {
                Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
                _ => None,
            })
        }))
    }

    /// The shape of this list's items.
    pub fn items(self) -> Shape<'a> {
        let node = match self {
            Shape::Builtin => return Shape::Builtin,
            Shape::Root(node) => Some(node),
            Shape::Schema(node) => node,
        };
        Shape::Schema(node.and_then(|n| match &n.items {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s.as_ref()),
            Some(JSONSchemaPropsOrArray::Schemas(all)) => all.first(),
            None => None,
        }))
    }

    fn node(self) -> Option<&'a JSONSchemaProps> {
        match self {
            Shape::Builtin => None,
            Shape::Root(node) => Some(node),
            Shape::Schema(node) => node,
        }
    }

    /// How this list (named `field`, holding `items`) is merged.
    pub fn list_kind(self, field: &str, items: &[Value]) -> ListKind {
        if let Shape::Builtin = self {
            return list_kind(field, items);
        }
        let node = self.node();
        let scalars = items.iter().all(|i| !i.is_object() && !i.is_array());
        match node.and_then(|n| n.x_kubernetes_list_type.as_deref()) {
            Some("set") if scalars => ListKind::Set,
            Some("map") if items.iter().all(Value::is_object) => {
                let keys = node.and_then(|n| n.x_kubernetes_list_map_keys.clone());
                ListKind::Keyed(keys.unwrap_or_default())
            }
            _ => ListKind::Atomic,
        }
    }

    /// Whether this map (named `field`) is replaced and owned whole.
    pub fn is_atomic_map(self, field: &str) -> bool {
        match self {
            Shape::Builtin => is_atomic_map(field),
            _ => self.node().and_then(|n| n.x_kubernetes_map_type.as_deref()) == Some("atomic"),
        }
    }
}

/// How the elements of a list are identified.
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Replaced and owned as a whole.
    Atomic,
    /// Scalars identified by value (`finalizers`).
    Set,
    /// Objects identified by these key fields (`containers` by `name`).
    Keyed(Vec<String>),
}

pub fn list_kind(field: &str, items: &[Value]) -> ListKind {
    if field == "finalizers" && items.iter().all(|i| !i.is_object() && !i.is_array()) {
        return ListKind::Set;
    }
    if !items.iter().all(Value::is_object) {
        return ListKind::Atomic;
    }
    match strategic::merge_key(field, items) {
        // Ports are keyed by port and protocol in the schema, which the
        // strategic merge key leaves out.
        Some(key) if field == "ports" => ListKind::Keyed(vec![key.into(), "protocol".into()]),
        Some(key) if field == "topologySpreadConstraints" => {
            ListKind::Keyed(vec![key.into(), "whenUnsatisfiable".into()])
        }
        Some(key) => ListKind::Keyed(vec![key.into()]),
        None => ListKind::Atomic,
    }
}

/// Maps and structs the schema marks `x-kubernetes-map-type: atomic`
/// (label selectors, object references): replaced and owned whole.
pub fn is_atomic_map(field: &str) -> bool {
    matches!(
        field,
        "selector"
            | "labelSelector"
            | "namespaceSelector"
            | "configMapKeyRef"
            | "secretKeyRef"
            | "fieldRef"
            | "resourceFieldRef"
            | "configMapRef"
            | "secretRef"
            | "targetRef"
            | "claimRef"
            | "scaleTargetRef"
            | "dataSource"
            | "dataSourceRef"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> JSONSchemaProps {
        serde_json::from_value(json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "protocol"],
                    "items": {"type": "object"}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}))
        .unwrap()
    }

    #[test]
    fn the_schema_marks_decide_and_metadata_stays_built_in() {
        let schema = schema();
        let root = Shape::Root(&schema);
        let spec = root.member("spec");
        let objects = [json!({"name": "a"})];
        let ports = spec.member("ports").list_kind("ports", &objects);
        assert_eq!(
            ports,
            ListKind::Keyed(vec!["name".into(), "protocol".into()])
        );
        let tags = spec.member("tags").list_kind("tags", &[json!("x")]);
        assert_eq!(tags, ListKind::Set);
        let args = spec.member("args").list_kind("args", &[json!("x")]);
        assert_eq!(args, ListKind::Atomic, "unmarked lists are atomic");
        assert!(spec.member("selector").is_atomic_map("selector"));
        assert!(!spec.member("labels").is_atomic_map("labels"));
        let finalizers = root.member("metadata").member("finalizers");
        assert_eq!(
            finalizers.list_kind("finalizers", &[json!("f")]),
            ListKind::Set
        );
        let unknown = spec.member("nothing").items();
        assert_eq!(unknown.list_kind("containers", &objects), ListKind::Atomic);
    }
}
