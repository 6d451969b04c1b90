//! Types whose strategy is data: a definition, table columns, selectable
//! fields and an optional validation, over the typed Kubernetes object.

use std::marker::PhantomData;

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::conversion::Conversion;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::scale;
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::typed::{decode, Decoded};

pub struct Simple<K> {
    pub def: ResourceDef,
    pub columns: fn() -> Vec<Column>,
    pub cells: fn(&Value) -> Vec<Value>,
    pub fields: &'static [(&'static str, &'static str)],
    pub validate: fn(&Value) -> Vec<Cause>,
    /// Update-only checks (immutable fields), on top of `validate`.
    pub validate_update: fn(&Value, &Value) -> Vec<Cause>,
    /// Defaults, applied on create and on update.
    pub defaults: fn(&mut Value),
    /// Create-only preparation, after `defaults` (status reset, generated
    /// labels).
    pub on_create: fn(&mut Value),
    /// The `Name` cell of a Table row.
    pub name_cell: fn(&Value) -> Value,
    /// For a type served in several versions (see `Strategy::conversion`).
    pub conversion: Option<fn() -> Conversion>,
    /// See `Strategy::table_order`.
    pub table_order: Option<fn(&Value, &Value) -> std::cmp::Ordering>,
    pub kind: PhantomData<fn() -> K>,
}

impl<K> Strategy for Simple<K>
where
    K: DeserializeOwned + Serialize + JsonSchema + 'static,
{
    fn def(&self) -> &ResourceDef {
        &self.def
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<K>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<K>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        (self.defaults)(obj);
        (self.on_create)(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        (self.defaults)(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        (self.validate)(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = (self.validate)(new);
        causes.extend((self.validate_update)(new, old));
        causes
    }

    fn name_cell(&self, obj: &Value) -> Value {
        (self.name_cell)(obj)
    }

    fn columns(&self) -> Vec<Column> {
        (self.columns)()
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        (self.cells)(obj)
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        self.fields
    }

    fn scale_of(&self, obj: &Value) -> Option<Value> {
        self.def.has_scale().then(|| scale::scale_of(obj))
    }

    fn conversion(&self) -> Option<Conversion> {
        self.conversion.map(|conversion| conversion())
    }

    fn table_order(&self) -> Option<fn(&Value, &Value) -> std::cmp::Ordering> {
        self.table_order
    }
}

pub fn def(
    group: &'static str,
    resource: &'static str,
    kind: &'static str,
    singular: &'static str,
) -> ResourceDef {
    ResourceDef::new(group, "v1", resource, kind, singular)
}

pub fn simple<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        def,
        columns: || vec![AGE],
        cells: |o| vec![age_cell(o)],
        fields: &[],
        validate: |_| Vec::new(),
        validate_update: |_, _| Vec::new(),
        defaults: |_| {},
        on_create: |_| {},
        name_cell: |o| o["metadata"]["name"].clone(),
        conversion: None,
        table_order: None,
        kind: PhantomData,
    }
}
