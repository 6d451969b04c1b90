//! The per-kind contract: the decisions the generic flow leaves to a kind
//! (decoding, defaults, validation, table columns, the Scale view,
//! selectable fields, versions), beside what the kind declares as data
//! (its [`ResourceDef`]). Everything here is pure: JSON in, JSON or
//! causes out.

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use super::definition::ResourceDef;
use super::typed::Decoded;
use crate::error::Cause;
use crate::object::time;

/// One column of `kubectl get` output (a Table column definition).
#[derive(Debug, Clone)]
pub struct Column {
    pub name: &'static str,
    pub kind: &'static str,
    pub description: &'static str,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: u8,
}

impl Column {
    pub const fn new(name: &'static str, kind: &'static str, description: &'static str) -> Column {
        Column {
            name,
            kind,
            description,
            priority: 0,
        }
    }

    pub const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Column {
        Column {
            name,
            kind,
            description,
            priority: 1,
        }
    }

    pub fn definition(&self) -> Value {
        let format = if self.name == "Name" { "name" } else { "" };
        json!({"name": self.name, "type": self.kind, "format": format,
               "description": self.description, "priority": self.priority})
    }
}

pub const AGE: Column = Column::new(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

pub fn age_cell(obj: &Value) -> Value {
    Value::String(time::age(obj["metadata"]["creationTimestamp"].as_str()))
}

pub trait Strategy: Send + Sync + 'static {
    fn def(&self) -> &ResourceDef;

    /// Decodes the body as the typed Kubernetes object (see [`super::typed`]).
    fn decode(&self, value: &Value) -> Result<Decoded, String>;

    /// The OpenAPI schema of the type.
    fn schema(&self, generator: &mut SchemaGenerator) -> Schema;

    /// Defaults and server-owned fields on create (after generic metadata).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Carries over what an update may not change (after generic metadata).
    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) {}

    fn validate(&self, _obj: &Value) -> Vec<Cause> {
        Vec::new()
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<Cause> {
        self.validate(new)
    }

    /// The `Name` cell of a Table row (a default StorageClass says so).
    fn name_cell(&self, obj: &Value) -> Value {
        obj["metadata"]["name"].clone()
    }

    /// Table columns after `Name`.
    fn columns(&self) -> Vec<Column> {
        vec![AGE]
    }

    /// Cells for [`Strategy::columns`], in order.
    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![age_cell(obj)]
    }

    /// The order of a list's Table rows when it is not the stored one
    /// (kube prints FlowSchemas in matching order).
    fn table_order(&self) -> Option<fn(&Value, &Value) -> std::cmp::Ordering> {
        None
    }

    /// What a delete changes in a marked object besides its metadata (a
    /// namespace says Terminating).
    fn prepare_for_delete(&self, _marked: &mut Value) {}

    /// Accepts strategic merge patches: built-in types carry the patch
    /// strategies and merge keys they need; custom types do not.
    fn strategic_merge(&self) -> bool {
        true
    }

    /// How server-side apply merges and owns the type's lists and maps:
    /// built-in types by field name, custom ones by their schema.
    fn shape(&self) -> crate::object::managed_fields::Shape<'_> {
        crate::object::managed_fields::Shape::Builtin
    }

    /// The autoscaling/v1 Scale of `obj`, for types with `/scale`.
    fn scale_of(&self, _obj: &Value) -> Option<Value> {
        None
    }

    /// Sets the replicas a `/scale` write asks for in `obj`.
    fn set_replicas(&self, obj: &mut Value, replicas: i64) {
        obj["spec"]["replicas"] = replicas.into();
    }

    /// Field selector labels this type supports beyond `metadata.name` and
    /// `metadata.namespace`, with the JSON pointer each one reads.
    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// For a type served in several versions (one strategy per version,
    /// the same group and resource): the version objects are stored in
    /// and what converts between them (see `registry::conversion`). None:
    /// served in its own version only.
    fn conversion(&self) -> Option<super::conversion::Conversion> {
        None
    }

    /// Served to clients. A version kept only to write the type's objects
    /// (a CRD's storage version marked `served: false`) is neither routed
    /// nor discovered, but stores and converts as the others do.
    fn served(&self) -> bool {
        true
    }
}

/// The value a field selector compares for `field`, or None when the type
/// does not support selecting on it.
pub fn field_value(strategy: &dyn Strategy, obj: &Value, field: &str) -> Option<String> {
    let pointer = match field {
        "metadata.name" => "/metadata/name",
        "metadata.namespace" => "/metadata/namespace",
        other => {
            strategy
                .selectable_fields()
                .iter()
                .find(|(f, _)| *f == other)?
                .1
        }
    };
    Some(match obj.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    })
}

pub fn supports_field(strategy: &dyn Strategy, field: &str) -> bool {
    matches!(field, "metadata.name" | "metadata.namespace")
        || strategy
            .selectable_fields()
            .iter()
            .any(|(f, _)| *f == field)
}
