//! ServiceAccounts (core/v1): identities for processes, whose tokens
//! the `/token` subresource issues (TokenRequest).

use k8s_openapi::api::core::v1::ServiceAccount;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use super::token::TOKEN;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::def;
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::typed::{decode, Decoded};

pub struct ServiceAccounts {
    def: ResourceDef,
}

impl Default for ServiceAccounts {
    fn default() -> ServiceAccounts {
        ServiceAccounts {
            def: ResourceDef {
                short_names: &["sa"],
                subresources: &[TOKEN],
                ..def("", "serviceaccounts", "ServiceAccount", "serviceaccount")
            },
        }
    }
}

impl Strategy for ServiceAccounts {
    fn def(&self) -> &ResourceDef {
        &self.def
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<ServiceAccount>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<ServiceAccount>()
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."),
            AGE,
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let secrets = obj["secrets"].as_array().map_or(0, Vec::len);
        vec![json!(secrets), age_cell(obj)]
    }
}
