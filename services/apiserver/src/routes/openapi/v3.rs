//! OpenAPI v3: one document per group-version with the served types'
//! schemas (from the Kubernetes types) and their paths. Each PATCH carries
//! `x-kubernetes-group-version-kind` and a `fieldValidation` parameter,
//! which is what tells kubectl to leave validation to this server.
//! OpenAPI v2 is built from these documents (`v2.rs`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use schemars::gen::SchemaSettings;
use serde_json::{json, Map, Value};

use crate::registry::{Catalog, Strategy};

/// Rendered documents by path (`api/v1`, `apis/apps/v1`) with their hash,
/// and the v2 document made from them.
pub struct Documents {
    pub(super) v3: HashMap<String, (String, String)>,
    v2: super::v2::Cache,
}

impl Documents {
    pub fn build(catalog: &Catalog) -> Documents {
        let mut docs = HashMap::new();
        for (group, version) in catalog.groups() {
            let strategies: Vec<&dyn Strategy> = catalog
                .entries()
                .iter()
                .map(|e| e.strategy.as_ref())
                .filter(|s| s.def().group == group && s.def().version == version)
                .collect();
            let path = if group.is_empty() {
                format!("api/{version}")
            } else {
                format!("apis/{group}/{version}")
            };
            docs.insert(path, rendered(&strategies));
        }
        Documents {
            v3: docs,
            v2: Default::default(),
        }
    }

    /// The v2 document (and its hash) of the built-in and custom types.
    pub fn v2(&self, catalog: &Catalog) -> std::sync::Arc<super::v2::Document> {
        self.v2.get(&self.v3, &custom_documents(catalog))
    }
}

/// The document's text and its hash.
fn rendered(strategies: &[&dyn Strategy]) -> (String, String) {
    let body = group_document(strategies).to_string();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    (body, format!("{:016X}", hasher.finish()))
}

/// The documents of the group-versions types defined at run time serve
/// (custom resources), built when asked for since they come and go.
pub(super) fn custom_documents(catalog: &Catalog) -> HashMap<String, (String, String)> {
    let entries = catalog.custom_entries();
    let mut docs = HashMap::new();
    for entry in &entries {
        let def = entry.strategy.def();
        let path = format!("apis/{}/{}", def.group, def.version);
        if docs.contains_key(&path) {
            continue;
        }
        let strategies: Vec<&dyn Strategy> = entries
            .iter()
            .map(|e| e.strategy.as_ref())
            .filter(|s| s.def().group == def.group && s.def().version == def.version)
            .collect();
        docs.insert(path, rendered(&strategies));
    }
    docs
}

fn group_document(strategies: &[&dyn Strategy]) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut paths = Map::new();
    let mut kinds = Vec::new();
    for strategy in strategies {
        let reference =
            serde_json::to_value(strategy.schema(&mut generator)).expect("schemas serialise");
        let name = reference["$ref"]
            .as_str()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        kinds.push((name, strategy.def()));
        for (path, item) in path_items(*strategy, &reference) {
            paths.insert(path, item);
        }
    }
    let mut schemas: Map<String, Value> = generator
        .definitions()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::to_value(v).expect("schemas serialise"),
            )
        })
        .collect();
    crate::routes::patch_metadata::annotate(&mut schemas);
    for (name, def) in kinds {
        if let Some(schema) = schemas.get_mut(&name) {
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": def.group, "version": def.version, "kind": def.kind}]);
        }
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths, "components": {"schemas": schemas}})
}

fn path_items(strategy: &dyn Strategy, reference: &Value) -> Vec<(String, Value)> {
    let def = strategy.def();
    let base = if def.group.is_empty() {
        format!("/api/{}", def.version)
    } else {
        format!("/apis/{}/{}", def.group, def.version)
    };
    let scope = if def.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
    let body = |types: &[&str]| {
        let content: Map<String, Value> = types
            .iter()
            .map(|t| (t.to_string(), json!({"schema": reference})))
            .collect();
        json!({"content": content})
    };
    let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}});
    let write_params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
    ]);
    let op = |action: &str, extra: Value| {
        let mut op = json!({"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk, "responses": ok, "operationId": format!("{action}{}", def.kind)});
        if let Value::Object(extra) = extra {
            op.as_object_mut().expect("object").extend(extra);
        }
        op
    };
    let collection = json!({
        "get": op("list", json!({})),
        "post": op("post", json!({"parameters": write_params, "requestBody": body(&["*/*"])})),
    });
    let item = json!({
        "get": op("get", json!({})),
        "put": op("put", json!({"parameters": write_params, "requestBody": body(&["*/*"])})),
        "patch": op("patch", json!({"parameters": write_params, "requestBody": body(&[
            "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"])})),
        "delete": op("delete", json!({})),
    });
    vec![
        (format!("{base}{scope}/{}", def.resource), collection),
        (format!("{base}{scope}/{}/{{name}}", def.resource), item),
    ]
}
