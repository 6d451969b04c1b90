//! The per-type contract: what a resource is (its [`ResourceDef`]) and the
//! decisions the generic flow leaves to it (defaults, validation, table
//! columns, selectable fields). Everything here is pure: JSON in, JSON or
//! causes out.

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use super::subresource::{Serve, Subresource};
use super::typed::Decoded;
use crate::auth::{Authorizer, UserInfo};
use crate::error::{ApiError, Cause, Target};
use crate::object::meta::NameRule;
use crate::object::time;

/// The static description of a resource type, as discovery shows it.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lower-case: the URL segment and the storage key segment.
    pub resource: &'static str,
    pub kind: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// What the kind serves below its objects (see `subresource`): with
    /// `status`, the main resource ignores `.status` on writes and
    /// `/status` writes change nothing else; with `scale`, an
    /// autoscaling/v1 Scale over `spec.replicas`.
    pub subresources: &'static [Subresource],
    pub name_rule: NameRule,
}

impl ResourceDef {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn target(&self, name: &str) -> Target {
        Target {
            group: self.group.into(),
            resource: self.resource.into(),
            name: name.into(),
        }
    }

    /// The subresource named `name`, if the kind serves one.
    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Has a `/status` subresource.
    pub fn has_status(&self) -> bool {
        self.subresources
            .iter()
            .any(|s| matches!(s.serve, Serve::Status))
    }

    /// Has a `/scale` subresource.
    pub fn has_scale(&self) -> bool {
        self.subresources
            .iter()
            .any(|s| matches!(s.serve, Serve::Scale))
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

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

/// A value an object holds alone across the cluster, such as a service's
/// cluster IP: the store keeps one claim key per value (see
/// `storage::claims`), written with the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The claim's name under the claims prefix: `serviceips/10.96.0.10`.
    pub name: String,
    /// Where the object holds the value, for the cause when it is taken.
    pub field: String,
    pub value: String,
    /// What the cause says when another object holds it.
    pub taken: &'static str,
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

    /// Values `obj` holds alone across the cluster.
    fn claims(&self, _obj: &Value) -> Vec<Claim> {
        Vec::new()
    }

    /// Picks the unique values `obj` leaves to the server (at random, so
    /// a pick that turns out taken is redone by calling this again on the
    /// unpicked object), carrying over what `old` already holds.
    fn allocate(&self, _obj: &mut Value, _old: Option<&Value>) {}

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

    /// Graceful deletion: how many seconds a delete of `obj` waits before
    /// the object goes (0: at once), given the grace period the request
    /// asked for (Kubernetes' CheckGracefulDelete).
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> i64 {
        0
    }

    /// Objects of this type hold the objects of every namespaced type that
    /// name them as their namespace: a delete marks one, its contents are
    /// deleted first, and no object is created in a marked one.
    fn holds_contents(&self) -> bool {
        false
    }

    /// Finalizers a delete adds, for the type's own cleanup before the
    /// object goes (a CRD's instances).
    fn delete_finalizers(&self) -> &'static [&'static str] {
        &[]
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

    /// Objects of this type expire after the server's event TTL.
    fn expires(&self) -> bool {
        false
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

    /// Refuses a write its requester (the user, and the authorizer that
    /// answers for them) may not make because of what the object grants
    /// (`old` is None on a create), after validation. The server's own
    /// writes are trusted and not asked.
    fn check_requester(
        &self,
        _obj: &Value,
        _old: Option<&Value>,
        _requester: (&UserInfo, &dyn Authorizer),
    ) -> Result<(), ApiError> {
        Ok(())
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
