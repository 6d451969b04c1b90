//! The `widgets` kind: any JSON object, with a status and a `polish`.

use k8s_openapi::api::core::v1::ConfigMap;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::Value;

use super::polish::POLISH;
use crate::registry::definition::ResourceDef;
use crate::registry::strategy::Strategy;
use crate::registry::subresource::{Subresource, STATUS};
use crate::registry::typed::Decoded;

const SUBRESOURCES: &[Subresource] = &[STATUS, POLISH];

pub const DEF: ResourceDef = ResourceDef {
    subresources: SUBRESOURCES,
    ..ResourceDef::new("example.capstan.dev", "v1", "widgets", "Widget", "widget")
};

pub struct Widgets;

/// A handle on widgets kept in memory, as an actor would hold it.
pub fn handle() -> crate::registry::flow::Handle {
    crate::registry::flow::Handle {
        strategy: std::sync::Arc::new(Widgets),
        store: std::sync::Arc::new(crate::storage::MemoryStorage::new()),
        prefix: "/registry".into(),
        namespace_contents: Default::default(),
        expiry: None,
        admission: std::sync::Arc::new(crate::admission::Chain::default()),
    }
}

impl Strategy for Widgets {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        Ok(Decoded {
            canonical: value.clone(),
            unknown_fields: Vec::new(),
        })
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<ConfigMap>()
    }
}
