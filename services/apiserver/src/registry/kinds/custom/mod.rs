//! The strategy of a custom resource: data read from its
//! CustomResourceDefinition (names, scope, the storage version's
//! structural schema, subresources, printer columns), so one type serves
//! every CRD and no code names a custom kind.

mod columns;

/// The published schema names the fields every object has, as kube's does
/// (a CRD's schema usually leaves them out): clients that validate against
/// it (kubectl) would otherwise call them unknown.
fn with_type_meta(schema: &mut Value) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    let fields = [
        (
            "apiVersion",
            "APIVersion defines the versioned schema of this representation of an object.",
            "string",
        ),
        (
            "kind",
            "Kind is a string value representing the REST resource this object represents.",
            "string",
        ),
        ("metadata", "Standard object's metadata.", "object"),
    ];
    for (name, description, kind) in fields {
        properties
            .entry(name)
            .or_insert_with(|| json!({"type": kind, "description": description}));
    }
}

#[cfg(test)]
mod flow_tests;
mod intern;
pub mod prune;
pub mod rules;
pub mod schema;
pub mod webhook;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    JSONSchemaProps,
};
use schemars::gen::SchemaGenerator;
use schemars::schema::{Schema, SchemaObject};
use serde_json::{json, Value};

use std::sync::Arc;

use self::columns::PrinterColumn;
use crate::admission::objects::Objects;
use crate::error::Cause;
use crate::registry::conversion::{Conversion, Converter, Rewrite};
use crate::registry::definition::ResourceDef;
use crate::registry::strategy::{Column, Strategy};
use crate::registry::subresource::{SCALE, STATUS, STATUS_AND_SCALE};
use crate::registry::typed::Decoded;

pub struct Custom {
    def: ResourceDef,
    /// The version is `served` (else it only stores: see `Strategy::served`).
    served: bool,
    schema: Option<JSONSchemaProps>,
    /// The schema's `x-kubernetes-validations`, compiled.
    rules: rules::Rules,
    /// `selectableFields`: field selector labels and the pointers they read.
    selectable: &'static [(&'static str, &'static str)],
    columns: Vec<PrinterColumn>,
    scale: Option<CustomResourceSubresourceScale>,
}

/// Where a CRD's objects are kept: kube's `/registry/<group>`, so a
/// custom plural never shares keys with a built-in one.
pub fn storage_prefix(prefix: &str, crd: &CustomResourceDefinition) -> String {
    format!("{prefix}/{}", crd.spec.group)
}

impl Custom {
    /// The strategy of `crd`'s storage version (None without one).
    pub fn of(crd: &CustomResourceDefinition) -> Option<Custom> {
        let version = crd.spec.versions.iter().find(|v| v.storage)?;
        Some(Custom::of_version(crd, version))
    }

    /// The strategies of `crd`'s served versions (the storage version's
    /// too, served or not, so its objects are written through it), and
    /// how objects convert between them: `None` rewrites apiVersion only,
    /// `Webhook` asks the CRD's webhook (its service looked up in
    /// `objects`).
    pub fn versions(
        crd: &CustomResourceDefinition,
        objects: Arc<dyn Objects>,
    ) -> Option<(Vec<Arc<dyn Strategy>>, Conversion)> {
        let storage = crd.spec.versions.iter().find(|v| v.storage)?;
        let served = crd.spec.versions.iter().filter(|v| v.served || v.storage);
        let strategies = served
            .map(|v| Arc::new(Custom::of_version(crd, v)) as Arc<dyn Strategy>)
            .collect();
        let spec = crd.spec.conversion.as_ref();
        let converter: Arc<dyn Converter> = match spec.filter(|c| c.strategy == "Webhook") {
            Some(spec) => match webhook::Webhook::of(spec, objects) {
                Some(hook) => Arc::new(hook),
                None => Arc::new(Rewrite),
            },
            None => Arc::new(Rewrite),
        };
        let conversion = Conversion {
            storage_version: intern::text(&storage.name),
            converter,
        };
        Some((strategies, conversion))
    }

    fn of_version(
        crd: &CustomResourceDefinition,
        version: &CustomResourceDefinitionVersion,
    ) -> Custom {
        let names = &crd.spec.names;
        let subresources = version.subresources.clone().unwrap_or_default();
        let def = ResourceDef {
            namespaced: crd.spec.scope == "Namespaced",
            short_names: intern::list(names.short_names.as_deref().unwrap_or_default()),
            categories: intern::list(names.categories.as_deref().unwrap_or_default()),
            subresources: match (subresources.status.is_some(), subresources.scale.is_some()) {
                (false, false) => &[],
                (true, false) => &[STATUS],
                (false, true) => &[SCALE],
                (true, true) => STATUS_AND_SCALE,
            },
            ..ResourceDef::new(
                intern::text(&crd.spec.group),
                intern::text(&version.name),
                intern::text(&names.plural),
                intern::text(&names.kind),
                intern::text(
                    names
                        .singular
                        .as_deref()
                        .unwrap_or(&names.kind.to_lowercase()),
                ),
            )
        };
        let mut columns: Vec<PrinterColumn> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(PrinterColumn::of)
            .collect();
        if columns.is_empty() {
            columns.push(PrinterColumn::age());
        }
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.clone());
        let rules = schema.as_ref().map(rules::Rules::of).unwrap_or_default();
        Custom {
            def,
            served: version.served,
            schema,
            rules,
            selectable: selectable(version),
            columns,
            scale: subresources.scale,
        }
    }
}

impl Custom {
    /// The schema's causes, then its rules' (`old` on an update).
    fn validate_against(&self, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(schema) = &self.schema {
            // The machinery's fields are checked by the generic flow.
            let mut body = obj.clone();
            if let Some(map) = body.as_object_mut() {
                map.remove("metadata");
                map.remove("apiVersion");
                map.remove("kind");
            }
            schema::validate(schema, &body, "", &mut causes);
        }
        causes.extend(self.rules.validate(obj, old));
        causes
    }
}

/// A version's `selectableFields`: `.spec.color` is selected as
/// `spec.color` and read at `/spec/color`.
fn selectable(
    version: &CustomResourceDefinitionVersion,
) -> &'static [(&'static str, &'static str)] {
    let fields: Vec<(String, String)> = version
        .selectable_fields
        .iter()
        .flatten()
        .map(|f| {
            let path = f.json_path.trim_start_matches('.');
            (path.to_string(), format!("/{}", pointer(path)))
        })
        .collect();
    intern::pairs(&fields)
}

/// `.spec.replicas` as the JSON pointer `/spec/replicas`.
fn pointer(path: &str) -> String {
    path.replace('.', "/")
}

impl Strategy for Custom {
    fn def(&self) -> &ResourceDef {
        &self.def
    }

    fn served(&self) -> bool {
        self.served
    }

    /// A schema has no patch strategies or merge keys; kube refuses
    /// strategic merge patches of custom objects (415).
    fn strategic_merge(&self) -> bool {
        false
    }

    /// The schema's list types and map types.
    fn shape(&self) -> crate::object::managed_fields::Shape<'_> {
        use crate::object::managed_fields::Shape;
        self.schema.as_ref().map_or(Shape::Builtin, Shape::Root)
    }

    /// Prunes what the schema does not specify; the pruned paths are the
    /// unknown fields `fieldValidation` reports or refuses.
    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        if !value.is_object() {
            return Err("the body is not a JSON object".into());
        }
        let mut canonical = value.clone();
        let unknown_fields = match &self.schema {
            Some(schema) => prune::prune_root(schema, &mut canonical),
            None => Vec::new(),
        };
        Ok(Decoded {
            canonical,
            unknown_fields,
        })
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        let name = format!("{}.{}.{}", self.def.group, self.def.version, self.def.kind);
        let mut schema = self
            .schema
            .as_ref()
            .map(|s| json!(s))
            .unwrap_or(json!({"type": "object"}));
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": self.def.group, "version": self.def.version, "kind": self.def.kind}]);
        with_type_meta(&mut schema);
        let schema: Schema = serde_json::from_value(schema).unwrap_or(Schema::Bool(true));
        generator.definitions_mut().insert(name.clone(), schema);
        Schema::Object(SchemaObject::new_ref(format!(
            "#/components/schemas/{name}"
        )))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            prune::default(schema, obj);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.prepare_for_create(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        self.validate_against(obj, None)
    }

    /// Transition rules (`oldSelf`) compare with the stored object.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        self.validate_against(new, Some(old))
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        self.selectable
    }

    fn columns(&self) -> Vec<Column> {
        self.columns.iter().map(|c| c.column.clone()).collect()
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        self.columns.iter().map(|c| c.cell(obj)).collect()
    }

    fn set_replicas(&self, obj: &mut Value, replicas: i64) {
        let Some(scale) = &self.scale else { return };
        let mut cursor = obj;
        for key in scale
            .spec_replicas_path
            .split('.')
            .filter(|p| !p.is_empty())
        {
            if !cursor.is_object() {
                *cursor = json!({});
            }
            let map = cursor.as_object_mut().expect("an object");
            cursor = map.entry(key).or_insert(Value::Null);
        }
        *cursor = replicas.into();
    }

    fn scale_of(&self, obj: &Value) -> Option<Value> {
        let scale = self.scale.as_ref()?;
        let meta = &obj["metadata"];
        let read = |path: &str| obj.pointer(&pointer(path)).cloned();
        let mut status = json!({"replicas": read(&scale.status_replicas_path).and_then(|v| v.as_i64()).unwrap_or(0)});
        if let Some(selector) = scale.label_selector_path.as_deref().and_then(read) {
            status["selector"] = selector;
        }
        Some(json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                         "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": read(&scale.spec_replicas_path).and_then(|v| v.as_i64()).unwrap_or(0)},
            "status": status,
        }))
    }
}
